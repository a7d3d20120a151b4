// Package rate limits how often events happen, with a token bucket, and
// shapes the throughput of an io.Reader or io.Writer to a byte rate.
//
// # The model
//
// A Bucket holds at most Burst tokens and gains Rate tokens per second. An
// event takes one token (or n, for weighted events: bytes, costs); when the
// bucket has too few, the event is rejected or waits. Over any interval of
// length t a bucket admits at most Rate·t + Burst tokens. A new bucket is
// full. A Bucket is safe for concurrent use.
//
// The zero Bucket admits nothing (rate 0, burst 0) until SetRate and
// SetBurst configure it, and then starts empty; use NewBucket.
//
// # Which method when
//
//   - Allow / AllowN: decide now, never wait (drop, or answer 429, on false).
//   - Wait / WaitN: wait for tokens, within ctx's deadline and
//     Config.MaxWait. A request whose tokens would come too late fails at
//     once, taking nothing: the failure costs microseconds, not the timeout.
//     Cancelling ctx while waiting gives the tokens back.
//   - Reserve: take tokens now, act after Reservation.Delay; Cancel gives
//     them back if the work does not run.
//   - Acquire / TryAcquire / Stats: the sluice.Limiter contract, so a Bucket
//     composes with other limiters (sluice.All cancels the bucket's permit,
//     refunding the token, when a later limiter says no) and plugs into the
//     middleware.
//   - NewReader / NewWriter: shape a stream to Rate bytes per second.
//   - AllowAt, ReserveAt, TokensAt, SetRateAt, SetBurstAt: the same
//     decisions at an explicit time (always the first argument), for
//     simulators and tests. ReserveAt is Wait's decision: Wait reserves
//     with a maxWait of the lesser of MaxWait and the time left to ctx's
//     deadline, then waits out the Delay.
//
// Limits change at run time with SetRate, SetBurst and SetMaxWait, safely
// under concurrent use: the tokens in the bucket (and the debt of waiting
// reservations) carry over and refill at the new rate from then on.
// Reservations already made keep their delays.
//
// # How it works
//
// The state is one int64, the time E at which the bucket was empty
// (GCRA, the "theoretical arrival time" form): tokens(now) =
// min(Burst, (now−E)·Rate). Taking n tokens moves E forward by n/Rate, with
// one compare-and-swap; no lock, no allocation, one read of the monotonic
// clock. A reservation that must wait leaves E in the future, a debt later
// callers see as fewer tokens. The config lives with that word in an
// immutable object behind an atomic pointer. A setter retires the object
// (its word becomes a sentinel that fails every in-flight CAS, which then
// reloads) and publishes a new one with the tokens carried over, so an
// admission never mixes an old config with new state. The arithmetic on
// that word is shared with keyed.Buckets, which keeps one such word per key.
//
// Under contention one word written by every admission moves between cores
// on every admission. So a bucket with a large burst (at least 4× what its
// stripes hold: 1,024 tokens on 2 cores) splits on the first collision on
// its word: the word keeps Burst−P tokens and per-goroutine stripes hold
// up to P more, taken from the word 32 at a time. Single-token admissions
// take from their stripe without touching the word or the clock. It never
// admits more than the bucket would, rejects only when the word and every
// stripe are empty, and setters and Tokens see the stripes; the details
// and the argument are in lease.go, figures in docs/benchmarks.md.
//
// # Edge cases
//
//	Rate 0             no refill: Burst tokens in total, then nothing.
//	Rate Inf (or +Inf) everything is admitted; Burst is ignored.
//	Burst 0            nothing is admitted (unless Rate is Inf).
//	n > Burst          never admitted: rejected at once with
//	                   sluice.ReasonTooLarge, even by Wait.
//	n <= 0             admitted at once, takes nothing.
//	time going back    an earlier time sees the bucket as it was then
//	                   (fewer tokens; with Rate 0, the same): it can only
//	                   reject more, never admit more. Nothing is clamped
//	                   or reset. Setters take effect at their time, so
//	                   give them the latest time (SetRate reads the clock).
//	huge rates         time is kept in fixed point down to 2^-30 ns, so an
//	                   interval below a nanosecond keeps 16 bits of
//	                   precision up to ~1.6e13 tokens/s, and still 0.03% at
//	                   1e15/s; above ~1e18/s the bucket admits at most
//	                   ~1.07e18 tokens per second. It never jams open.
//	tiny rates         if refilling the whole bucket would take more than
//	                   2^60 ns (36 years), the bucket does not refill at
//	                   all (as with Rate 0). No arithmetic overflows: every
//	                   sum saturates.
//	far-away times     explicit times within ±292 years of the process
//	                   start work; the internal time base moves as needed.
//
// Precision: the interval between tokens keeps at least 16 significant
// bits, so the rate is exact to 2^-17 (8 ppm) for any rate up to ~1.6e13/s
// and any Burst up to ~8e12 (a larger Burst leaves fewer bits).
package rate
