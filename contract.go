package sluice

import (
	"context"
	"strconv"
	"time"
)

// Limiter is the admission contract shared by every limiter in sluice.
//
// Acquire blocks until the work is admitted, rejected, or ctx is done. A
// rejection is a *RejectError (test it with errors.Is against ErrRejected or a
// reason's sentinel); a cancelled wait returns ctx.Err(), possibly wrapped.
// TryAcquire decides at once and never waits.
//
// Implementations are safe for concurrent use.
type Limiter interface {
	Acquire(ctx context.Context) (Permit, error)
	TryAcquire() (Permit, error)
	Stats() Stats
}

// Outcome tells a limiter how admitted work ended. Adaptive limits treat
// Success as a latency sample, Dropped as an overload signal and learn nothing
// from Ignore.
type Outcome uint8

const (
	// Success: the work completed; its latency is a valid sample.
	Success Outcome = iota
	// Dropped: the work failed in a way that signals overload (a 5xx, a
	// timeout, a rejection further down).
	Dropped
	// Ignore: the outcome says nothing about capacity (the client went away,
	// a 4xx).
	Ignore
)

// Work that never ran is not an outcome: Permit.Cancel gives back what the
// permit was granted (a concurrency slot without a sample, refunded rate
// tokens).

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Dropped:
		return "dropped"
	case Ignore:
		return "ignore"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Releaser is implemented by limiters that hand out permits. token is the
// value the limiter gave NewPermit; its meaning is private to the limiter.
// Callers use Permit, never Releaser directly.
//
// Release ends admitted work with one of the three outcomes (an Outcome
// beyond them is treated as Ignore); Cancel gives back what was granted,
// for work that never ran.
type Releaser interface {
	Release(token uint64, o Outcome, latency time.Duration)
	Cancel(token uint64)
}

// Permit is admission granted by a Limiter. Release it exactly once, with the
// outcome and latency of the work; a second Release (or Cancel) on the same
// Permit variable does nothing. Do not copy a Permit and release both copies.
// A Permit is not safe for concurrent use: Release or Cancel it from one
// goroutine, or under a lock.
//
// The zero Permit holds nothing: releasing it does nothing.
type Permit struct {
	r     Releaser
	token uint64
}

// NewPermit is for limiter implementations: it returns a Permit that calls
// r.Release(token, ...) once when released.
func NewPermit(r Releaser, token uint64) Permit { return Permit{r: r, token: token} }

// Release reports how the admitted work ended and frees what it held.
func (p *Permit) Release(o Outcome, latency time.Duration) {
	r := p.r
	if r == nil {
		return
	}
	p.r = nil
	r.Release(p.token, o, latency)
}

// Cancel gives back what the permit was granted: the work never ran. Like
// Release, it acts once.
func (p *Permit) Cancel() {
	r := p.r
	if r == nil {
		return
	}
	p.r = nil
	r.Cancel(p.token)
}

// Held reports whether the permit still has something to release.
func (p *Permit) Held() bool { return p.r != nil }

// Stats is a snapshot of a limiter's state and counters.
type Stats struct {
	// Limit is the current limit: requests in flight for a concurrency
	// limiter, events per second for a rate limiter.
	Limit float64
	// InFlight is the number of permits held now (concurrency limiters).
	InFlight int
	// Queued is the number of callers waiting now.
	Queued int
	// Admitted counts permits granted since the limiter was created.
	Admitted uint64
	// Rejected counts rejections by reason; index it with a Reason.
	Rejected [NumReasons]uint64
}

// RejectedTotal is the sum of Rejected over all reasons.
func (s Stats) RejectedTotal() uint64 {
	var n uint64
	for _, v := range s.Rejected {
		n += v
	}
	return n
}
