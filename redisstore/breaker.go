package redisstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the state of a Store's circuit breaker.
type BreakerState uint8

const (
	BreakerClosed   BreakerState = iota // calls go to Redis
	BreakerOpen                         // calls fail at once, to the failure policy
	BreakerHalfOpen                     // one probe call goes to Redis
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// breaker opens after threshold consecutive failed round trips; while
// open, allow answers false from one atomic load, so a dead Redis costs a
// caller nanoseconds instead of a timeout. After cooldown one probe goes through
// (half-open); its success closes the breaker, its failure opens it again.
// Time is an argument (monotonic nanoseconds) so the logic is tested
// without a clock.
type breaker struct {
	threshold int
	cooldown  int64

	openUntil atomic.Int64 // > now: open; the fast path reads only this
	state     atomic.Uint32
	trips     atomic.Uint64

	mu       sync.Mutex
	failures atomic.Int64 // written under mu, but cleared without it on success
	probing  bool
	lastTrip uint64 // the latest round trip counted as failed
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: int64(cooldown)}
}

// allow reports whether a call may go to Redis at now.
func (b *breaker) allow(now int64) bool {
	if now < b.openUntil.Load() {
		return false
	}
	if BreakerState(b.state.Load()) == BreakerClosed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return true
	case BreakerOpen:
		if now < b.openUntil.Load() {
			return false
		}
		b.state.Store(uint32(BreakerHalfOpen))
		b.probing = true
		return true
	default: // half-open: one probe at a time
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// done records the result of a call that allow let through, made in
// round trip trip (numbered in the order they start; 0: the call was never
// sent). While closed, a failed round trip counts once, however many of
// its calls report it, and so does one that started before the latest
// counted (with several pipelines in flight, the breaker may undercount
// by those, never overcount); a call never sent does not count. A failed
// probe, sent or not, opens the breaker again.
func (b *breaker) done(now int64, ok bool, trip uint64) {
	if ok && BreakerState(b.state.Load()) == BreakerClosed {
		// The hot path: a success while closed only needs to clear a
		// failure streak, and there rarely is one: no lock for that.
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures.Store(0)
		b.probing = false
		b.state.Store(uint32(BreakerClosed))
		b.openUntil.Store(0)
		return
	}
	st := BreakerState(b.state.Load())
	if st == BreakerClosed && (trip == 0 || trip <= b.lastTrip) {
		return
	}
	b.lastTrip = max(b.lastTrip, trip)
	failures := b.failures.Add(1)
	if st == BreakerHalfOpen || (st == BreakerClosed && failures >= int64(b.threshold)) {
		b.probing = false
		b.state.Store(uint32(BreakerOpen))
		b.openUntil.Store(now + b.cooldown)
		b.trips.Add(1)
	}
}

func (b *breaker) current() BreakerState { return BreakerState(b.state.Load()) }
