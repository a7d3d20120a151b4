package concurrency

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// waiter is one caller waiting in the queue. The Event that ends its wait is
// sent on ch under mu, exactly once; ch has room for it, so the send never
// blocks. Waiters are reused through Limiter.pool.
type waiter struct {
	ch    chan Event
	timer *time.Timer
}

// acquireSlow is Acquire when the fast path is closed or full: ask the Core,
// and if it queues the caller, wait outside the lock for the Event, the wait
// bound's timer or ctx.
func (l *Limiter) acquireSlow(ctx context.Context) (sluice.Permit, error) {
	now := clock.Nanos()
	deadline := int64(noDeadline)
	if d, ok := ctx.Deadline(); ok {
		deadline = clock.FromTime(d)
	}
	l.mu.Lock()
	l.enter()
	a := l.core.arrive(now, deadline)
	// Dispatch before registering the newcomer: a LIFO queue may have
	// dropped its oldest waiter to make room, and the newcomer may reuse
	// that waiter's slot.
	l.dispatch()
	var w *waiter
	if a.Verdict == Queued {
		w = l.getWaiter()
		i := int(a.Waiter.index())
		for len(l.waiters) <= i {
			l.waiters = append(l.waiters, nil)
		}
		l.waiters[i] = w
	}
	l.leave()
	l.mu.Unlock()
	if w == nil {
		return l.verdict(a)
	}

	var expired <-chan time.Time
	if a.ExpiresIn > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(a.ExpiresIn)
		} else {
			w.timer.Reset(a.ExpiresIn)
		}
		expired = w.timer.C
	}
	for {
		select {
		case e := <-w.ch:
			return l.finish(w, e)
		case <-expired:
			// Expire everyone due, us included; the Event for us is in ch
			// before mu is released.
			l.mu.Lock()
			l.enter()
			l.core.events = l.core.events[:0]
			l.core.expireAt(clock.Nanos())
			l.dispatch()
			l.leave()
			l.mu.Unlock()
			select {
			case e := <-w.ch:
				return l.finish(w, e)
			default:
				// Woken before the bound (the clock read at arrival came
				// before the timer started): wait for the rest.
				w.timer.Reset(max(time.Duration(now-clock.Nanos())+a.ExpiresIn, time.Nanosecond))
			}
		case <-ctx.Done():
			l.mu.Lock()
			l.enter()
			removed := l.core.Remove(a.Waiter)
			if removed {
				l.waiters[a.Waiter.index()] = nil
			}
			l.leave()
			l.mu.Unlock()
			if !removed {
				// The Event won the race: it is in ch. A permit granted to
				// a caller that has gone is handed straight back.
				if e := <-w.ch; e.Admitted {
					p := sluice.NewPermit((*releaser)(l), e.Token)
					p.Cancel()
				}
			}
			l.putWaiter(w)
			return sluice.Permit{}, ctx.Err()
		}
	}
}

// finish turns the Event that ended w's wait into Acquire's result.
func (l *Limiter) finish(w *waiter, e Event) (sluice.Permit, error) {
	l.putWaiter(w)
	if e.Admitted {
		l.slowAdmitted.Add(1)
		return sluice.NewPermit((*releaser)(l), e.Token), nil
	}
	l.counters.Reject(e.Reason)
	return sluice.Permit{}, sluice.Reject(e.Reason, e.RetryAfter)
}

// dispatch delivers the Core's last Events to their waiters. Call with mu
// held. The waiters count them, so that a permit granted to a caller whose
// context ended at the same moment counts as neither.
func (l *Limiter) dispatch() {
	for _, e := range l.core.events {
		i := e.Waiter.index()
		w := l.waiters[i]
		l.waiters[i] = nil
		w.ch <- e
	}
	l.core.events = l.core.events[:0]
}

// getWaiter returns a waiter from the pool or a new one. Call with mu held.
func (l *Limiter) getWaiter() *waiter {
	if n := len(l.pool); n > 0 {
		w := l.pool[n-1]
		l.pool = l.pool[:n-1]
		return w
	}
	return &waiter{ch: make(chan Event, 1)}
}

// putWaiter stops w's timer and returns w to the pool. Since Go 1.23 a
// stopped timer delivers no stale tick, so the next user of w starts clean.
func (l *Limiter) putWaiter(w *waiter) {
	if w.timer != nil {
		w.timer.Stop()
	}
	l.mu.Lock()
	// The pool never holds more waiters than the queue can: MaxQueue bounds
	// the waiters alive at once.
	l.pool = append(l.pool, w)
	l.mu.Unlock()
}
