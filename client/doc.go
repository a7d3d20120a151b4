// Package client protects a service from its own clients: it keeps the load
// a client sends bounded, and backs off when the server says it is full.
//
// A client that fires every request at once, or retries every failure at
// once, turns a slow server into a dead one. Four pieces prevent that; use
// any of them alone or together:
//
//   - [Executor] runs tasks with at most N in flight. Each new task starts
//     the moment a slot frees, so there are no batches and no head-of-line
//     blocking, and only the N running tasks hold goroutines.
//   - [Throttler] is the Google SRE book's client-side adaptive throttling:
//     over a two-minute window it rejects requests locally with probability
//     max(0, (requests − K·accepts) / (requests + 1)), so a backend in
//     overload spends little on requests it would reject anyway. It is a
//     sluice.Limiter.
//   - [Retrier] retries with capped exponential backoff and full jitter,
//     counted from a server's Retry-After when it sends one (so the clients
//     it told the same time do not all come back at it), gives up when the
//     wait would outlast the context's deadline, and spends a [RetryBudget]
//     that keeps retries under 10% of requests (so an outage adds 1.1 times
//     the load, not 3 times).
//   - [Transport] is an http.RoundTripper that admits every attempt through
//     any sluice.Limiter (a concurrency limit, a Throttler, sluice.All of
//     both) and retries 429 and 503 answers and transport errors under the
//     same policy, except the errors no retry can cure (an invalid URL, an
//     untrusted TLS certificate), which it returns at once. A retry its
//     limiter rejects was never sent: it costs the budget nothing, and the
//     caller gets the answer that called for it (the 503, body and all).
//
// The decisions (the throttle probability, the budget, the backoff) are pure
// code with explicit-time forms (...At) so that the simulator can run them in
// virtual time; only Executor.Go, Retrier.Do and Transport wait.
//
// Every counter a dashboard needs is in Stats: requests, retries, retries
// the budget denied, and locally throttled requests.
package client
