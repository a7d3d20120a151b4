// Package proxy is `sluice proxy`: the sluice library as a sidecar, an
// HTTP reverse proxy (net/http/httputil.ReverseProxy) that puts a limit in
// front of any service.
//
// A config file (Config; every field in docs/proxy.md) lists routes, which
// match requests by host, path prefix and method and send them to an
// upstream, and policies, the limits a route's requests pass first: a token
// bucket (global or per key), a concurrency limit with a queue (fixed, or
// adaptive), a concurrency limit per key, any of them at once (all or
// nothing), or a dry run. A policy may keep its token bucket and its
// concurrency limit in a shared store (stores: Redis, through the
// redisstore module), so that several proxies share one limit. Each route with a policy is an httplimit.Handler
// in front of its ReverseProxy; the answers (429 or 503, Retry-After, the
// RateLimit fields) are httplimit's.
//
// The files, along the design's seams:
//
//   - config.go: the file's types and decoding (strict, file:line: field
//     errors, ${ENV}); validate.go: its validation;
//   - policy.go: a Policy built from the library; route.go: a Route built,
//     its ReverseProxy, matching;
//   - store.go: a shared store (StoreSpec) opened, and its metrics;
//     shared.go: a policy's limiters in a store;
//   - outcome.go: how a proxied request ends for the limiters (5xx, the
//     upstream's 502 and 504 included, is Dropped, long-lived requests
//     give their permits back early, as Ignore); gone.go: a client that
//     went away before the upstream answered (its permits held until the
//     upstream is done); deadline.go: a timeout the client sends in a
//     header (an overload signal only from a trusted proxy); upload.go: a
//     slow or broken-off upload, the client's (408 or 400, Ignore);
//   - server.go: the serving state, hot reload (a new state built in full,
//     then swapped; unchanged policies and routes are the same objects),
//     shutdown; admin.go and metrics.go: the admin API and /metrics.
package proxy
