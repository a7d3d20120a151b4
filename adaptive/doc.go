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
// carries the latency, the number in flight when the request started and
// the outcome (Dropped is the overload signal: a 5xx, a timeout, a
// rejection downstream).
//
//	vegas, err := adaptive.NewVegas(adaptive.VegasConfig{MaxLimit: 500})
//	...
//	limit := vegas.Observe(now, adaptive.Sample{Latency: d, InFlight: n, Outcome: sluice.Success})
//
// Every config's zero value is valid and each field documents its default;
// constructors reject bad values with an error that matches
// [sluice.ErrInvalidConfig]: a *[sluice.ConfigError] that names the field.
//
// # Which algorithm
//
//   - [Vegas] when requests cost about the same, so a queue shows as
//     latency above the no-load latency: it holds a small queue and
//     reaches capacity fastest (slow start).
//   - [Gradient2] for a mix of cheap and expensive requests: it compares
//     averages rather than a minimum, and trades up to Tolerance (1.5×)
//     of queueing for never running the service below capacity.
//   - [AIMD] when only failures can be trusted, or the limiter sits at a
//     client or proxy that sees errors and timeouts: it needs no latency
//     model, saws between Backoff× and the level that fails, and holds a
//     small limit exactly.
//
// Each type's documentation gives its formula, its regimes, the figures
// measured in the simulator, and where it departs from Netflix's
// concurrency-limits and why.
//
// # What the three share
//
//   - A limit that is not in use does not grow (samples that started with
//     less than half the limit in flight leave it alone), so a quiet hour
//     does not end with MaxLimit and no protection from the first burst.
//   - A burst of drops does not collapse the limit: AIMD and Vegas cut
//     once, the drops of requests admitted before a cut being answered by
//     it; Gradient2's cut is a tenth, repeated while the old limit's drops
//     come in.
//   - No probing: the no-load latency is learned from the traffic, never
//     by pinning the limit low (envoyproxy/envoy#8337), and only from load
//     at which it is known to hold, so it does not drift up with the queue
//     the limit itself lets in (Netflix/concurrency-limits #165, PR #134).
//   - Vegas and Gradient2 move once per round trip, on its mean latency,
//     as TCP does; every sample of a round trip reflects the same limit.
//   - Vegas and Gradient2 take a Timeout, as AIMD does: a success slower
//     than it counts as a drop, for a limiter that is not told when its
//     clients give up.
package adaptive
