package rate

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/waitrule"
)

// Reservation is tokens taken from a bucket ahead of time: the caller may
// act after Delay. A failed reservation took nothing; its Delay is a
// retry-after hint.
//
// Reservation is a small value; making one does not allocate. Cancel it at
// most once: do not cancel two copies.
type Reservation struct {
	b      *Bucket
	tokens int           // tokens taken, given back by Cancel
	delay  time.Duration // ok: wait before acting; !ok: until the tokens would be there, -1 never
	reason sluice.Reason // !ok: why
}

// Delay is how long to wait before acting on a successful reservation. For
// a failed one it is how long until the tokens would be there, or -1 if
// they never will (n > burst, or rate 0 and the bucket is empty).
func (r Reservation) Delay() time.Duration { return r.delay }

// Reason is why a reservation failed: sluice.ReasonTooLarge (n > burst) or
// sluice.ReasonRate (the tokens come later than maxWait, or never).
// It is sluice.ReasonUnknown for a successful reservation.
func (r Reservation) Reason() sluice.Reason { return r.reason }

// Tokens is the number of tokens the reservation holds; 0 under an
// infinite rate, for n <= 0, after Cancel and for a failed reservation.
func (r Reservation) Tokens() int { return r.tokens }

// Cancel gives the reserved tokens back, whether or not the caller has
// already waited: use it when the work will not run after all. The bucket
// never holds more than its burst afterwards.
func (r *Reservation) Cancel() {
	if r.b != nil && r.tokens > 0 {
		r.b.give(r.tokens)
	}
	r.tokens = 0
}

// Reserve takes n tokens now if they are there within maxWait, and reports
// whether it did. On success the caller must wait r.Delay() before acting,
// or Cancel.
func (b *Bucket) Reserve(n int, maxWait time.Duration) (r Reservation, ok bool) {
	return b.reserveNanos(live, n, maxWait)
}

// ReserveAt is Reserve at time now. It is the form for code that runs in
// virtual time, such as a simulator.
func (b *Bucket) ReserveAt(now time.Time, n int, maxWait time.Duration) (r Reservation, ok bool) {
	return b.reserveNanos(at(now), n, maxWait)
}

func (b *Bucket) reserveNanos(now int64, n int, maxWait time.Duration) (Reservation, bool) {
	g := b.takeNanos(now, n, max(maxWait, 0), noDeadline, sluice.ReasonRate, true)
	if !g.ok {
		return Reservation{delay: g.wait, reason: g.reason}, false
	}
	return Reservation{b: b, tokens: g.taken, delay: g.wait}, true
}

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error {
	_, err := b.wait(ctx, 1)
	return err
}

// WaitN waits until n tokens are taken. It fails at once, taking nothing,
// when they cannot be there in time: with sluice.ReasonDeadline when they
// would come after ctx's deadline, sluice.ReasonQueueTimeout when after
// Config.MaxWait, sluice.ReasonTooLarge when n > burst, sluice.ReasonRate
// when they never come (rate 0). The rejection's RetryAfter says when the
// tokens would be there. If ctx is done while waiting, the tokens are given
// back and ctx.Err() is returned.
func (b *Bucket) WaitN(ctx context.Context, n int) error {
	_, err := b.wait(ctx, n)
	return err
}

func (b *Bucket) wait(ctx context.Context, n int) (taken int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s, _ := b.load()
	limit, why := waitrule.MaxWait(s.maxWait)
	g := b.takeNanos(live, n, limit, waitrule.Deadline(ctx, at), why, false)
	if !g.ok {
		return 0, sluice.RejectQuota(g.reason, max(g.wait, 0))
	}
	taken = g.taken
	if g.wait > 0 {
		b.waiting.Add(1)
		err := waitrule.Sleep(ctx, g.wait)
		b.waiting.Add(-1)
		if err != nil {
			b.give(taken)
			return 0, err
		}
	}
	b.countAdmit(nil)
	return taken, nil
}

// Acquire waits for one token (see WaitN). Cancelling the returned permit
// gives the token back, so a composition such as sluice.All loses no tokens
// when a later limiter rejects; releasing it otherwise does nothing.
func (b *Bucket) Acquire(ctx context.Context) (sluice.Permit, error) {
	taken, err := b.wait(ctx, 1)
	if err != nil {
		return sluice.Permit{}, err
	}
	return sluice.NewPermit((*releaser)(b), uint64(taken)), nil
}

// TryAcquire takes one token if there is one now. Otherwise it returns a
// sluice.ReasonRate rejection whose RetryAfter is the time until a token is
// there (0 if one never will).
func (b *Bucket) TryAcquire() (sluice.Permit, error) {
	g := b.takeNanos(live, 1, 0, noDeadline, sluice.ReasonRate, true)
	if !g.ok {
		return sluice.Permit{}, sluice.RejectQuota(g.reason, max(g.wait, 0))
	}
	return sluice.NewPermit((*releaser)(b), uint64(g.taken)), nil
}

// Stats reports the rate as Limit, the callers waiting in Wait as Queued,
// and the admissions and rejections of every method.
func (b *Bucket) Stats() sluice.Stats {
	b.mu.Lock() // no state is being retired: its count is in one place
	defer b.mu.Unlock()
	s, _ := b.load()
	st := sluice.Stats{Limit: s.rate, Queued: int(b.waiting.Load())}
	b.c.Fill(&st)
	st.Admitted += b.admittedOld.Load()
	if s != &zeroState {
		st.Admitted += s.admitted.Load()
	}
	return st
}

// releaser keeps Release out of Bucket's method set.
type releaser Bucket

// Release does nothing: tokens spent on work that ran are spent.
func (r *releaser) Release(uint64, sluice.Outcome, time.Duration) {}

// Cancel refunds the tokens: the work never ran.
func (r *releaser) Cancel(token uint64) { (*Bucket)(r).give(int(token)) }
