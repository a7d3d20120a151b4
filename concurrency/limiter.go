package concurrency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/counter"
)

// Limiter limits the work in flight to its limit, queueing callers beyond it
// as its Config says. It is the waiting layer over a Core: decisions are the
// Core's, taken under a mutex that is never held while waiting.
//
// Use Acquire to wait (within MaxQueue, MaxWait, the discipline's bound and
// ctx) for a permit, TryAcquire to take one only if it is free now, and
// release every permit once with the work's outcome and latency.
//
// A Limiter is safe for concurrent use. Create it with New.
type Limiter struct {
	// state mirrors the Core for the fast path: permits in flight (bits
	// 0-31), the limit (bits 32-62) and slowBit. While slowBit is clear,
	// nobody is queued, no one holds mu in the middle of a decision, and
	// state's in-flight count is the truth (the Core's is stale): admitting
	// into a free permit and releasing one are single CASes. Any decision
	// that needs the Core sets slowBit under mu (enter), which diverts the
	// fast path to mu, and clears it when the queue is empty again (leave).
	state    atomic.Uint64
	counters counter.Counters

	queued atomic.Int64 // mirror of core.Queued for Stats
	// fastRelease reports that a release may skip the Core when nobody is
	// queued: there is no Algorithm to feed.
	fastRelease bool

	mu   sync.Mutex
	core Core
	// waiters[i] is the caller waiting in the Core's queue slot i.
	waiters []*waiter
	// pool holds waiters (channel and timer) for reuse. It is per Limiter,
	// not a sync.Pool: a channel must not cross testing/synctest bubbles.
	pool []*waiter
}

const (
	inFlightMask = 1<<32 - 1
	limitShift   = 32
	limitMask    = 1<<31 - 1
	slowBit      = 1 << 63
)

// New returns a Limiter configured by cfg, or an error naming the invalid
// field (it matches ErrInvalidConfig).
func New(cfg Config) (*Limiter, error) {
	l := new(Limiter)
	if err := l.core.init(cfg); err != nil {
		return nil, err
	}
	l.fastRelease = l.core.cfg.Algorithm == nil
	l.state.Store(uint64(l.core.limit) << limitShift)
	return l, nil
}

// releaser is the Limiter as seen by its permits; a distinct type keeps
// Release out of Limiter's method set.
type releaser Limiter

// Acquire returns a permit when one is free, waits for one in the queue, or
// rejects. A rejection is a *sluice.RejectError with the reason: ReasonLimit
// (no free permit and no queue), ReasonQueueFull, ReasonQueueTimeout (MaxWait
// passed), ReasonShed (CoDel) or ReasonDeadline (ctx's deadline is sooner
// than the estimated wait). If ctx ends first, Acquire returns ctx.Err() and
// the caller's place in the queue is freed at once.
func (l *Limiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return sluice.Permit{}, ctx.Err()
		default:
		}
	}
	if t, ok := l.tryFast(); ok {
		l.counters.Admit()
		return sluice.NewPermit((*releaser)(l), t), nil
	}
	return l.acquireSlow(ctx)
}

// TryAcquire returns a permit if one is free and nobody is queued (it never
// jumps the queue), and otherwise rejects with sluice.ReasonLimit. It never
// waits.
func (l *Limiter) TryAcquire() (sluice.Permit, error) {
	if t, ok := l.tryFast(); ok {
		l.counters.Admit()
		return sluice.NewPermit((*releaser)(l), t), nil
	}
	l.mu.Lock()
	l.enter()
	a := l.core.TryArrive()
	l.leave()
	l.mu.Unlock()
	return l.verdict(a)
}

// tryFast admits into a free permit while the fast path is open, and
// returns the permit's token (permits in flight, this one included).
func (l *Limiter) tryFast() (uint64, bool) {
	for {
		s := l.state.Load()
		if s&slowBit != 0 || s&inFlightMask >= s>>limitShift&limitMask {
			return 0, false
		}
		if l.state.CompareAndSwap(s, s+1) {
			return s&inFlightMask + 1, true
		}
	}
}

// Release implements sluice.Releaser for the Limiter's permits.
func (r *releaser) Release(token uint64, o sluice.Outcome, latency time.Duration) {
	l := (*Limiter)(r)
	if l.fastRelease || o == sluice.Ignore || o == sluice.Canceled {
		for {
			s := l.state.Load()
			if s&slowBit != 0 {
				break
			}
			if l.state.CompareAndSwap(s, s-1) {
				return
			}
		}
	}
	now := clock.Nanos()
	l.mu.Lock()
	l.enter()
	l.core.release(now, token, o, latency)
	l.dispatch()
	l.leave()
	l.mu.Unlock()
}

// SetLimit sets the limit. Growing it admits waiters at once; shrinking it
// revokes nothing: permits held above the new limit stay held until
// released, and no new one is granted until in flight drops below it. With
// an Algorithm, its next sample overrides the limit set here.
func (l *Limiter) SetLimit(n int) error {
	if n < 1 || n > MaxLimit {
		return fmt.Errorf("concurrency: SetLimit(%d): limit must be 1 to %d", n, MaxLimit)
	}
	now := clock.Nanos()
	l.mu.Lock()
	l.enter()
	l.core.setLimit(now, n)
	l.dispatch()
	l.leave()
	l.mu.Unlock()
	return nil
}

// Stats reports the limit, permits in flight, callers queued, and the
// admissions and rejections counted since New. It takes no lock.
func (l *Limiter) Stats() sluice.Stats {
	st := l.state.Load()
	s := sluice.Stats{
		Limit:    float64(st >> limitShift & limitMask),
		InFlight: int(st & inFlightMask),
		Queued:   int(l.queued.Load()),
	}
	l.counters.Fill(&s)
	return s
}

// enter makes the Core the truth: it closes the fast path (slowBit) and
// brings the Core's in-flight count up to date. Call with mu held.
func (l *Limiter) enter() {
	for {
		s := l.state.Load()
		if s&slowBit != 0 || l.state.CompareAndSwap(s, s|slowBit) {
			l.core.inFlight = int(s & inFlightMask)
			return
		}
	}
}

// leave publishes the Core's state to the fast path, and reopens the fast
// path if nobody is queued. Call with mu held, after enter.
func (l *Limiter) leave() {
	s := uint64(l.core.inFlight) | uint64(l.core.limit)<<limitShift
	if l.core.q.n > 0 {
		s |= slowBit
	}
	l.state.Store(s)
	l.queued.Store(int64(l.core.q.n))
}

// verdict turns an arrival that was not queued into Acquire's result.
func (l *Limiter) verdict(a Arrival) (sluice.Permit, error) {
	if a.Verdict == Admitted {
		l.counters.Admit()
		return sluice.NewPermit((*releaser)(l), a.Token), nil
	}
	l.counters.Reject(a.Reason)
	return sluice.Permit{}, sluice.Reject(a.Reason, a.RetryAfter)
}
