// Package sluice keeps a service at its capacity and fails the excess fast.
//
// This package holds the contract that every limiter in the module satisfies,
// so that limiters compose and so that the HTTP middleware, the client, the
// simulator and the metrics never care which limiter they hold:
//
//   - Acquire(ctx) waits (within limits) for admission and returns a [Permit],
//     or a *[RejectError] carrying a [Reason] and a retry-after hint, or the
//     context's error when the caller gave up. TryAcquire never waits.
//   - A Permit is released exactly once, with an [Outcome] (Success, Dropped,
//     Ignore) and the latency the work took; adaptive limits learn from both.
//     Cancel gives back what was granted when the work never ran.
//   - Stats reports limit, in flight, queued, admitted and rejected by reason
//     from atomic counters, cheaply enough to scrape often.
//
// The limiters live in sub-packages: rate (token bucket, byte shaping),
// concurrency (in-flight limit with FIFO, LIFO, CoDel and adaptive LIFO
// queues), adaptive (Little, the recommended one; Gradient2, AIMD, Vegas),
// keyed (per-key limits with bounded memory). [All] admits across several
// limiters all-or-nothing.
// What uses them: httplimit (net/http middleware), client (a bounded
// executor, retries under a budget, adaptive throttling, a RoundTripper),
// netlimit (a limiting net.Listener) and promsluice (Prometheus metrics).
//
// Rejections are errors, not booleans, so that they carry a reason and a
// retry-after hint through any number of layers: test them with errors.Is
// (ErrRejected, or a reason's sentinel such as ErrQueueFull) and read the
// hint with [RetryAfter].
//
// The decisions are pure code that takes the time as an argument, so the
// simulator in package sim runs the same code in virtual time:
// rate.Bucket's AllowAt, ReserveAt (a Wait's decision) and TokensAt,
// keyed.Buckets' AllowAt and TokensAt, concurrency.Core (a concurrency
// Limiter's decisions: Arrive, Release, Expire), and the adaptive
// algorithms' Observe. Waiting is a thin layer at the edge that reads the
// real clock: Acquire, Wait, and All, which only composes other limiters'
// Acquire and so has no decision of its own to take a time.
package sluice
