// Package adaptive finds a concurrency limit from what finished requests
// tell it, so that a service is kept busy but not queueing.
//
// By Little's law a service with N workers and service time S completes at
// most N/S requests per second; admitting more than N at a time adds only a
// queue. N is rarely known and changes with deploys, neighbours and the
// request mix, so the algorithms here learn it from samples.
//
// # Use
//
// An [Algorithm] is a pure state machine: Observe(now, Sample) returns the
// new limit; it reads no clock and starts no goroutine. Package concurrency
// calls it under its lock when a permit is released with Success or
// Dropped; package sim drives the same code in virtual time. A [Sample]
// carries the latency, the number in flight when the request started, the
// number waiting in the limiter's queue when it finished (Little grows
// faster while they wait and the latency is at no-load) and the outcome
// (Dropped is the overload signal: a 5xx, a timeout, a rejection
// downstream).
//
//	little, err := adaptive.NewLittle(adaptive.LittleConfig{MaxLimit: 500})
//	...
//	limit := little.Observe(now, adaptive.Sample{Latency: d, InFlight: n, Outcome: sluice.Success})
//
// Every config's zero value is valid and each field documents its default;
// constructors reject bad values with an error that matches
// [sluice.ErrInvalidConfig]: a *[sluice.ConfigError] that names the field.
//
// # Which algorithm
//
// Use [Little] behind a short LIFO queue unless you know better: it holds
// in flight the service's own concurrency plus Headroom (15%, Little's
// law) and learns the no-load latency from live traffic, so what it admits
// runs close to no-load speed and the service stays at capacity. Bound the
// queue's wait to a few service times so that a rejection is fast. The
// setup examples/server and the lab's tour use, and docs/proxy.md
// recommends for the proxy, is
//
//	little, err := adaptive.NewLittle(adaptive.LittleConfig{})
//	...
//	l, err := concurrency.New(concurrency.Config{
//		Algorithm: little, Discipline: concurrency.LIFO, MaxQueue: 50, MaxWaitServices: 4,
//	})
//
// (httplimit's Example_recommended puts it in front of a handler).
//
//   - [Gradient2] when the limit must never cost throughput and a queue
//     of about half the service's latency is acceptable: it lets latency
//     reach Tolerance (1.5) × a long-term average before it cuts.
//   - [AIMD] when only failures can be trusted, or the limiter sits at a
//     client or proxy that sees errors and timeouts: it needs no latency
//     model.
//   - [Vegas] is kept for comparison with Netflix's VegasLimit, not
//     recommended: with noisy service times its no-load estimate falls to
//     the fast tail and holds the limit far below capacity (see
//     docs/simulations.md).
//
// Each type's documentation gives its formula and where it departs from
// Netflix's concurrency-limits and why; measured figures, with the
// command that makes them, are in docs/simulations.md.
//
// # What they share
//
//   - A limit that is not in use does not grow (for AIMD, Vegas and
//     Gradient2, samples or round trips with less than half the limit in
//     flight leave it alone; for Little, a window whose in flight never
//     reached the limit), so a quiet hour does not end with MaxLimit and
//     no protection from the first burst.
//   - A burst of drops does not collapse the limit: AIMD, Vegas and Little
//     cut once, the drops of requests admitted before a cut being answered
//     by it; Gradient2's cut is a tenth, repeated while the old limit's
//     drops come in.
//   - No probing while traffic is healthy: the no-load latency is learned
//     from the traffic, never by pinning the limit low every so often
//     (envoyproxy/envoy#8337), and only from load at which it is known to
//     hold, so it does not drift up with the queue the limit itself lets
//     in (Netflix/concurrency-limits #165, PR #134). (Little halves its
//     limit once if it starts saturated, goes on while that lowers the
//     latency, and puts the limit back where the last halving showed no
//     queue.)
//   - Vegas, Gradient2 and Little move once per round trip or window, on
//     its mean latency, as TCP does; every sample of a round trip
//     reflects the same limit.
//   - All take a Timeout: a success slower than it counts as a drop, for a
//     limiter that is not told when its clients give up.
package adaptive
