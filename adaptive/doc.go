// Package adaptive finds a concurrency limit from what finished requests
// tell it, so that a service is kept busy but not queueing.
//
// By Little's law, in flight = throughput × latency. A service with N
// workers and service time S completes at most N/S requests per second;
// admitting more than N at a time adds nothing but a queue, and every queued
// request makes the ones behind it later. The right limit is therefore about
// N, but N is rarely known and changes with deploys, noisy neighbours and
// the request mix. The algorithms here learn it from samples.
//
// # Use
//
// An [Algorithm] is a pure state machine: Observe(now, Sample) returns the
// new limit; time is an argument, no clock is read and no goroutine runs.
// The concurrency limiter (package concurrency) calls Observe under its lock
// each time a permit is released with Success or Dropped; the simulator
// (package sim) drives the same code in virtual time. A [Sample] carries
// the latency, the number in flight when the request started and the
// outcome: Success is a latency sample, Dropped an overload signal (a 5xx,
// a timeout, a rejection downstream).
//
//	vegas, err := adaptive.NewVegas(adaptive.VegasConfig{MaxLimit: 500})
//	...
//	limit := vegas.Observe(now, adaptive.Sample{Latency: d, InFlight: n, Outcome: sluice.Success})
//
// Every config's zero value is valid; each field documents its default.
// Constructors reject bad values with an error that matches
// [ErrInvalidConfig] and names the field.
//
// # Which algorithm
//
//   - [Vegas] for a service whose requests cost about the same, so that a
//     queue shows as latency above the no-load latency. It holds a small
//     queue (3 to 6 requests below a limit of 100) and gets to capacity
//     fastest (slow start). Its baseline is the lowest latency seen at
//     light load (a mean over at least 32 requests, so a noisy service's
//     fastest requests do not set it), so a workload whose light-load
//     requests are cheaper than the rest (health checks at night, Netflix
//     PR #125) drags it low, and the limit with it. A queue of 3 requests
//     is a lot for a small, slow service: seed 003's 7 workers at 2 s
//     leave 0.5 s of slack, 1.75 requests; Vegas gets there (98% of
//     capacity with constant arrivals) because the client's timeouts come
//     back as drops, but with Poisson arrivals it holds 57–70%. Out of its
//     regime, with exponential service times (§15's sweep, 16 workers at
//     10 ms), it holds 49% of capacity: the first, thin evidence sets a
//     baseline far below the mean, and nothing corrects it within the
//     NoLoadWindow. Use Gradient2 or AIMD there.
//   - [Gradient2] for a mix of cheap and expensive requests: it compares
//     averages, not a minimum, so the cheap requests do not set the bar.
//     It lets latency reach Tolerance × its long-term average (1.5× by
//     default) before it pushes back: under sustained overload it holds
//     about 1.5–2.5 × the service's concurrency in flight: some queueing,
//     but it does not run the service below capacity (seed 000 at 600 rps:
//     100% of capacity, p99 85 ms; the overload sweeps: 99–100%, p50 15 ms
//     on 10 ms work). Its long-term average learns a slowdown only from
//     pooled evidence at a load where it is known to hold, so noise and the
//     queue it lets in do not ratchet it up (the drift of Netflix PR #134).
//     Where the client's deadline is within 1.5 × the service time (seed
//     003: 2.5 s on 2 s) its queue times requests out: about 72–85% of
//     capacity there.
//   - [AIMD] when only failures can be trusted (latency says little, or
//     the limiter sits at a client or proxy that sees errors and timeouts,
//     as in seed 003: +1 per second, back to 75% on an error). It needs no
//     latency model but learns only from failures, so it saws between
//     Backoff × and 1 × the point where things fail. Set Timeout to count
//     slow successes as failures. It is the one that holds a small limit
//     exactly: a backoff always takes a permit away, and a level that keeps
//     failing is probed exponentially less often, so with 7 workers it
//     dwells at 7 rather than sawing 6–9 (seed 003: 99% of the slowed
//     origin's capacity, with a one-slot queue in front of the limit;
//     87–91% with Poisson arrivals, where no limit reaches 95%).
//
// Vegas and Gradient2 take a Timeout too: a success slower than it counts
// as a drop, for a limiter that is not told when its clients give up.
//
// # What the three share
//
//   - A limit that is not in use does not grow: samples that started with
//     less than half the limit in flight leave it alone. Otherwise a quiet
//     hour would end with a limit of MaxLimit and the first burst would
//     find no protection.
//   - One cut per round trip: the failures of requests admitted before the
//     last cut are already answered by it. A burst of drops costs one
//     backoff, not one per request. (Gradient2's cut is a tenth, and it
//     keeps cutting while the old limit's drops come in.)
//   - No probing: the no-load latency is learned from the traffic as it
//     comes, never by pinning the limit low to measure it (Envoy's minRTT
//     probe drops concurrency to 3 and sheds healthy traffic meanwhile:
//     envoyproxy/envoy#8337). Vegas and Gradient2 learn their baseline only
//     from load at which it is known to hold, so it does not drift upward
//     with the queue the limit itself lets in (Netflix/concurrency-limits
//     #165, PR #134).
//   - Vegas and Gradient2 move once per round trip, on the mean latency of
//     the round trip, as TCP does; moving on every sample overshoots,
//     because every sample of a round trip reflects the same limit.
//
// The formulas and regimes are in each type's documentation, with the
// points where they differ from Netflix's concurrency-limits and why.
package adaptive
