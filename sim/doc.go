// Package sim is a discrete-event simulator in virtual time: it runs
// sluice's own decision code (the explicit-time forms of the concurrency,
// adaptive and rate packages) in front of a modeled origin, and reports what
// clients would have seen.
//
// A Scenario describes three things:
//
//   - an Origin: N workers, a service-time distribution (constant,
//     exponential, lognormal, bimodal), a FIFO queue (bounded or not), and
//     Changes at given times (a slowdown, workers lost);
//   - a Load: open-loop arrivals (constant or Poisson; steps, ramps, bursts),
//     a client deadline, a cap on outstanding requests, retries under a
//     budget;
//   - Policies to compare: none, a static concurrency limit with a FIFO, LIFO,
//     CoDel or adaptive LIFO queue, an adaptive limit (Little,
//     Gradient2, AIMD, Vegas), a token bucket (rejecting, or waiting up to a deadline), or
//     seed 000's ticker.
//
// Run simulates each policy against a fresh origin and the same arrivals and
// returns, per policy, a Summary and a time series: goodput (successes within
// the client deadline per second, the headline), throughput, rejects by
// reason, latency percentiles from HdrHistogram, and the limit and in-flight
// count over time. The same scenario and seed give the same result.
// Validate (which Run calls) names the field at fault, and refuses a run
// too large to finish in seconds or to hold in memory: more than 100,000
// points or 10 million requests per policy, or a queue that could hold more
// than a million requests at once. Each policy kind is a type of its own
// (NonePolicy, ConcurrencyPolicy, AdaptivePolicy, TokenBucketPolicy,
// TickerPolicy) holding only its settings.
//
// The model follows seed 003's setup, client → limiter → origin. The limiter
// admits, queues or rejects each request; an admitted request goes to the
// origin, which serves it or queues it or refuses it. A client that reaches
// its deadline gives up, but the origin still does the work (it cannot know),
// and the limiter's permit is released only when the origin answers: with
// Success if the client still waited, Dropped if it had gone or the origin
// refused. That Dropped is the overload signal adaptive limits learn from.
package sim
