// Package httplimit is net/http server middleware that puts sluice limiters
// in front of a handler.
//
// New wraps a handler with one policy: a per-key limit (PerKey: a
// *keyed.Buckets, the lean per-key token bucket, or a *keyed.Map of any
// limiter, keyed by a KeyFunc) and/or a global Limiter (any sluice.Limiter
// or a sluice.All composition). For each request it takes the per-key
// permit, then the global one (giving the per-key one back if the global
// says no), serves the request, and releases both with the outcome of the
// work.
//
//	perIP, _ := keyed.New(keyed.Config[*rate.Bucket]{
//		New: func(string) (*rate.Bucket, error) {
//			return rate.NewBucket(rate.Config{Rate: 10, Burst: 20})
//		},
//	})
//	little, _ := adaptive.NewLittle(adaptive.LittleConfig{}) // the recommended adaptive limit
//	inFlight, _ := concurrency.New(concurrency.Config{
//		Algorithm: little, Discipline: concurrency.LIFO, MaxQueue: 50, MaxWaitServices: 4,
//	})
//	h, err := httplimit.New(mux, httplimit.Config{PerKey: perIP, Limiter: inFlight})
//
// (Example_recommended runs the global half of it.)
//
// # Waiting
//
// By default a request may wait to be admitted, boundedly: the limiters see
// a deadline MaxWait (1s) away; at most MaxWaitingPerKey (8) requests of
// one key and MaxWaiting (1024) in all wait at once, and one more is
// refused at once. NoWait never waits: admitted or refused at once.
//
// # Keys
//
// The default key is the client IP: the TCP peer's address. Forwarding
// headers are client input and are read only when ClientIP.TrustedProxies
// lists the peer; then the key is the first untrusted address from the
// right of X-Forwarded-For (or Forwarded). IPv6 keys may be masked to a
// prefix (/64). HeaderKey, PathKey, PatternKey and MethodKey cover API keys
// and routes; any func is a KeyFunc. A request with no usable key is counted
// against FallbackKey, not let through.
//
// # Responses
//
// A rejection answers 429 Too Many Requests when the client is over its
// share (the per-key limit, or a rate) and 503 Service Unavailable when the
// server is at capacity (a concurrency limit, a full queue); see Status.
// Retry-After carries the limiter's hint rounded up to whole seconds. With
// a RatePolicy, every response carries RateLimit-Policy and a 429 carries
// RateLimit with r=0 (draft-ietf-httpapi-ratelimit-headers); with its
// Remaining (BucketRemaining, or a *keyed.Buckets' Remaining method),
// admitted responses carry RateLimit with the quota left. OnReject replaces
// the body; DryRun counts would-be rejections and admits everything.
//
// # Outcomes
//
// Permits are released in a defer, even when the handler panics. A 5xx or a
// request whose deadline passed is Dropped (overload), a client that left or
// a hijacked connection is Ignore, anything else is Success with the
// handler's latency: what adaptive limits learn from. A deadline set with a
// cause of its own (context.WithDeadlineCause: a client's timeout header
// from an untrusted peer) is not taken for overload: the answer decides.
//
// Why the limiters are asked in this order, why waits are bounded, how the
// wait context is made, and dry run's details are in docs/design.md,
// section httplimit.
package httplimit
