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
	ch chan Event
}

// acquireSlow is Acquire when the fast path is closed or full: ask the Core,
// and if it queues the caller, wait outside the lock for the Event that ends
// the wait (a permit, or a rejection by the expiry timer) or for ctx.
func (l *Limiter) acquireSlow(ctx context.Context) (sluice.Permit, error) {
	var now int64 // see Core.timed
	deadline := int64(noDeadline)
	if d, ok := ctx.Deadline(); ok {
		deadline = clock.FromTime(d)
	}
	if l.timed || deadline != noDeadline {
		now = clock.Nanos()
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

	select {
	case e := <-w.ch:
		return l.finish(w, e)
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
			// The Event won the race: it is in ch. A permit granted to a
			// caller that has gone is handed straight back.
			if e := <-w.ch; e.Admitted {
				p := sluice.NewPermit((*releaser)(l), e.Token)
				p.Cancel()
			}
		}
		l.putWaiter(w)
		return sluice.Permit{}, ctx.Err()
	}
}

// armExpiry makes sure the expiry timer will fire no later than the queue
// head's wait bound. Call with mu held.
//
// One timer serves the whole queue because the head always expires first
// (see Core.expiryFor). An armed timer is left alone when it is set no
// later than the head's bound: within a busy period every later head's
// bound is no earlier, so it fires early at worst, expires nothing, and
// re-arms. That costs a timer operation per expiry rather than per waiter.
// A timer set for an earlier busy period may be later than a new head's
// bound (MaxWaitServices follows the mean service time, which may have
// fallen since): it is re-armed then.
func (l *Limiter) armExpiry() {
	if l.core.q.n == 0 {
		return
	}
	at := l.core.q.nodes[l.core.q.head].expiry
	if at == noDeadline || l.expiryAt != 0 && l.expiryAt <= at {
		return
	}
	d := time.Duration(at - clock.Nanos())
	if l.expiry == nil {
		l.expiry = time.AfterFunc(d, l.onExpiry)
	} else {
		l.expiry.Reset(d)
	}
	l.expiryAt = at
}

// onExpiry rejects the waiters whose bound has passed and re-arms the timer
// for the new head.
func (l *Limiter) onExpiry() {
	l.mu.Lock()
	l.enter()
	l.expiryAt = 0
	l.core.events = l.core.events[:0]
	l.core.expireAt(clock.Nanos())
	l.dispatch()
	l.leave()
	l.mu.Unlock()
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

// putWaiter returns w, its Event consumed, to the pool.
func (l *Limiter) putWaiter(w *waiter) {
	l.mu.Lock()
	// The pool never holds more waiters than the queue can: MaxQueue bounds
	// the waiters alive at once.
	l.pool = append(l.pool, w)
	l.mu.Unlock()
}
