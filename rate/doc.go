// Package rate limits how often events happen, with a token bucket, and
// shapes the throughput of an io.Reader or io.Writer to a byte rate.
//
// # The model
//
// A Bucket holds at most Burst tokens and gains Rate tokens per second. An
// event takes one token (or n, for weighted events: bytes, costs); when the
// bucket has too few, the event is rejected or waits. Over any interval of
// length t a bucket admits at most Rate·t + Burst tokens. A new bucket is
// full. A Bucket is safe for concurrent use; an admission is one
// compare-and-swap, with no lock and no allocation.
//
// Make one with NewBucket. The zero Config admits nothing; so does the
// zero Bucket, until SetRate and SetBurst configure it (it then starts
// empty). Config.MaxWait 0: only the context's deadline bounds a wait.
//
// # Which method when
//
//   - Allow / AllowN: decide now, never wait (drop, or answer 429, on false).
//   - Wait / WaitN: wait for tokens, within ctx's deadline and
//     Config.MaxWait. A request whose tokens would come too late fails at
//     once, taking nothing. Cancelling ctx while waiting gives the tokens
//     back.
//   - Reserve: take tokens now, act after Reservation.Delay; Cancel gives
//     them back if the work does not run.
//   - Acquire / TryAcquire / Stats: the sluice.Limiter contract, so a Bucket
//     composes with other limiters (sluice.All cancels the bucket's permit,
//     refunding the token, when a later limiter says no) and plugs into the
//     middleware.
//   - NewReader / NewWriter: shape a stream to Rate bytes per second.
//   - Tokens / Remaining: what the bucket holds now; Remaining says it as
//     the IETF RateLimit field does (whole tokens, time until full).
//   - AllowAt, ReserveAt, TokensAt, RemainingAt, SetRateAt, SetBurstAt,
//     SetLimitsAt: the same decisions at an explicit time (always the first
//     argument), for simulators and tests. An earlier time sees the bucket
//     as it was then: it can only reject more, never admit more.
//
// Limits change at run time with SetRate, SetBurst, SetLimits (rate and
// burst in one step) and SetMaxWait, safely under concurrent use: the
// tokens in the bucket (and the debt of waiting reservations) carry over
// and refill at the new rate from then on.
// Reservations already made keep their delays.
//
// # Edge cases
//
//	Rate 0             no refill: Burst tokens in total, then nothing.
//	Rate Inf (or +Inf) everything is admitted; Burst is ignored.
//	Burst 0            refused by NewBucket at a finite rate above 0;
//	                   SetBurst(0) closes a live bucket: nothing is
//	                   admitted (unless Rate is Inf).
//	n > Burst          never admitted: rejected at once with
//	                   sluice.ReasonTooLarge, even by Wait.
//	n <= 0             admitted at once, takes nothing.
//
// How the bucket works (one int64, GCRA; stripes under contention), its
// precision, and its behaviour at huge and tiny rates and far-away times
// are in docs/design.md, section rate.
package rate
