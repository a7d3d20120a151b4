// Package load is an open-loop HTTP load generator: it sends requests at
// the times a schedule says, whatever the server does, and measures what a
// client population would have seen.
//
// A Config names the target URL and the schedule, in the simulator's terms
// (sim.Load, a scenario file's load: section): constant or Poisson
// arrivals at a rate, steps or a ramp, bursts, a client timeout. Run sends
// each request at its intended time through a pool of workers, at most one
// per connection, that take the sends in order, over kept-alive
// connections, and returns a Result.
//
// What it measures, and why:
//
//   - Latency from each request's intended send time, not from when it
//     left: a generator that falls behind (or a closed-loop tool that waits
//     for answers, like hey or wrk) would otherwise hide the very stalls it
//     should show (coordinated omission). HdrHistogram, 3 digits.
//   - Goodput, 2xx answers within the client's timeout per second, is the
//     headline; rejections (429, 503, or any answer with a ReasonHeader) are
//     counted by reason with their own latency, apart from failures (other
//     statuses, transport errors, timeouts).
//   - Whether the schedule was kept: sends skipped (ClientWorkers requests
//     outstanding, or already past their timeout) and sends late by more
//     than LateAfter, with the distribution of the send lag. A Result with
//     skipped or late sends says so instead of reporting a load it did not
//     offer.
//   - A per-Interval series by intended send time (offered, goodput,
//     rejections, failures, success percentiles), with throughput by
//     completion time.
//
// Clients > 1 spreads the load over that many clients, in turn: each with
// its own source address in 127.0.0.0/8 (ViaAddr, for a loopback target)
// or its own X-Forwarded-For address (ViaXFF), for per-key limits.
//
// Before sending, Run opens one connection to the target: an unreachable
// target is ErrUnreachable in under a second, not a run of timeouts.
package load
