package concurrency

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// The fast path.
//
// hot.state mirrors the Core in one word so that the common case — a permit
// free and nobody queued — costs one CAS to acquire (one add far from the
// limit, see reserve.go) and one atomic add to release:
//
//	bits  0-23  permits in flight
//	bits 24-47  the limit
//	bits 48-61  admissions not yet added to Limiter.flushed
//	bit  62     pendingBit: a flush of the admission count is under way
//	bit  63     slowBit: the Core is the truth; take mu
//
// While slowBit is clear nobody is queued and the word's in-flight count is
// the truth (the Core's copy is stale). Every decision that needs the Core
// takes mu and sets slowBit (enter), which sends the fast path to mu too;
// leave publishes the Core's counts and clears slowBit once the queue is
// empty. So the fast path only ever decides what the Core would: admit when
// a permit is free and nobody waits, and give a permit back when nobody
// waits and there is no Algorithm to feed.
//
// Admissions are counted in the word rather than in a second atomic, which
// would cost a second read-modify-write on every acquire. When the count
// reaches flushAt, the acquirer that reaches it moves flushMove of them to
// Limiter.flushed; pendingBit tells Stats that the move is half done.
//
// Far from the limit the fast path admits with one add instead of a CAS;
// see reserve.go.
const (
	inFlightMask = 1<<24 - 1
	limitShift   = 24
	limitMask    = 1<<24 - 1
	countShift   = 48
	countMask    = 1<<14 - 1
	countOne     = 1 << countShift
	flushAt      = 1 << 13
	flushMove    = flushAt / 2 // see flush
	pendingBit   = 1 << 62
	slowBit      = 1 << 63
)

// hot is alone in its cache line: the allocator aligns 64-byte objects to
// 64 bytes, so no other field shares the line every fast path writes.
type hot struct {
	state atomic.Uint64
	_     [56]byte
}

// fastAdmit reports whether state word s lets the fast path admit with a
// plain CAS to s+1+countOne: open, a permit free, and the count not due
// for a flush. Acquire and TryAcquire make that one attempt inline (when
// the wide path is off or failed) and fall back to tryFast.
func fastAdmit(s uint64) bool {
	return s&slowBit == 0 && s&inFlightMask < s>>limitShift&limitMask && s>>countShift&countMask < flushAt-1
}

// tryFast admits into a free permit while the fast path is open, and
// returns the permit's token (permits in flight, this one included). The
// admission that brings the count to flushAt moves flushMove admissions to
// Limiter.flushed.
func (l *Limiter) tryFast() (uint64, bool) {
	for {
		s := l.hot.state.Load()
		if s&slowBit != 0 || s&inFlightMask >= s>>limitShift&limitMask {
			return 0, false
		}
		n, flush := s+1+countOne, false
		switch c := n >> countShift & countMask; {
		case c >= flushAt && s&pendingBit == 0:
			n, flush = n-flushMove*countOne|pendingBit, true
		case c == countMask:
			// A flush has been pending for thousands of admissions: let
			// the slow path count this one rather than overflow the field.
			return 0, false
		}
		if l.hot.state.CompareAndSwap(s, n) {
			if flush {
				l.flushed.Add(flushMove)
				l.hot.state.And(^uint64(pendingBit))
			}
			return s&inFlightMask + 1, true
		}
	}
}

// releaseFast gives a permit back with one atomic add, and reports whether
// the fast path was open. If it was not, the decrement landed on the
// word's mirror of the Core's count, which the next leave overwrites, and
// the caller must release through the Core; enter, which does not copy the
// count while the fast path is already closed, keeps the Core's count
// exact meanwhile. The word's count cannot underflow: it never falls below
// the permits whose releases have not yet reached it.
//
// One release in 64 (by the admission count) also feeds its latency to the
// service-time estimate that deadline-aware admission needs once a queue
// forms, and, if the wide path is off, reopens it should the word allow it
// (see reserve.go). Until the count first reaches 64 (it never falls back
// below it: a flush leaves flushAt-flushMove), every release feeds the
// estimate, so that a deadline is judged from the first release on rather
// than after a warm-up of 64; the test is on the word already loaded.
func (l *Limiter) releaseFast(o sluice.Outcome, latency time.Duration) bool {
	s := l.hot.state.Add(^uint64(0))
	if s&inFlightMask == inFlightMask {
		// The count was 0: no permit was held, so this is a copied Permit
		// released twice (the word's count never falls below the permits
		// still to be released, see above). The decrement borrowed from
		// the limit; adding it back carries it home.
		l.hot.state.Add(1)
		return true
	}
	if s&slowBit != 0 {
		return false
	}
	c := s >> countShift & countMask
	if c&63 == 0 {
		if !l.wide.Load() {
			l.widen(s)
		}
	} else if c >= 64 {
		return true
	}
	if o != canceled && latency > 0 {
		l.sample(latency)
	}
	return true
}

// sample folds a latency into the fast path's service-time estimate. The
// load and store may lose a concurrent sample, which an average can afford.
func (l *Limiter) sample(latency time.Duration) {
	l.meanSvc.Store(ewma(l.meanSvc.Load(), int64(latency)))
}

// enter makes the Core the truth: it closes the fast path and, if it was
// open, brings the Core's in-flight count and estimate up to date from it.
// If it was already closed the Core is already the truth (and the word's
// count may be off by releases on their way to mu). Call with mu held.
func (l *Limiter) enter() {
	for {
		s := l.hot.state.Load()
		if s&slowBit != 0 {
			l.setWide(false)
			return
		}
		// Published before the word says slow: from that moment Stats
		// reads this count instead of the word's, and a stale one (0
		// from the last slow spell) would show a held limiter idle, which
		// keyed.Map evicts. The word's count includes cached permits: an
		// over-count, until the exact count below.
		l.inFlight.Store(int64(s & inFlightMask))
		if l.hot.state.CompareAndSwap(s, s|slowBit) {
			l.setWide(false)
			l.core.inFlight = int(s&inFlightMask) - l.drainCache()
			l.inFlight.Store(int64(l.core.inFlight))
			l.core.meanSvc = l.meanSvc.Load()
			return
		}
	}
}

// leave publishes the Core's counts to the fast path, and reopens it if
// nobody is queued. Call with mu held, after enter. It keeps the count
// bits, and CASes rather than stores because a flusher may still clear
// pendingBit.
func (l *Limiter) leave() {
	n := uint64(l.core.inFlight) | uint64(l.core.limit)<<limitShift
	if l.core.q.n > 0 {
		n |= slowBit
	}
	// Before the word: while it stays slow, Stats reads these.
	l.queued.Store(int64(l.core.q.n))
	l.inFlight.Store(int64(l.core.inFlight))
	for {
		s := l.hot.state.Load()
		if w := s&(countMask<<countShift|pendingBit) | n; l.hot.state.CompareAndSwap(s, w) {
			l.setWide(l.widens(w))
			break
		}
	}
	l.meanSvc.Store(l.core.meanSvc)
	l.armExpiry()
}

// snapshot returns the state word and the admissions counted so far. A
// flush subtracts from the word before it adds to flushed, so a reading is
// taken again if a flush was pending or completed during it.
func (l *Limiter) snapshot() (uint64, uint64) {
	for {
		f := l.flushed.Load()
		s := l.hot.state.Load()
		if s&pendingBit == 0 && l.flushed.Load() == f {
			return s, f + s>>countShift&countMask + l.slowAdmitted.Load()
		}
		runtime.Gosched()
	}
}

// fullFast reports, without the lock, a rejection the Core would make:
// every permit held and no queue (ReasonLimit), or a full queue that
// rejects newcomers (ReasonQueueFull). Under overload most arrivals are
// rejected, and they should not queue on mu to be told so. It may miss a
// permit or a place freed this instant, as any decision a moment earlier
// would; the Core's own expiry of overdue waiters is left to the timer.
func (l *Limiter) fullFast() (sluice.Reason, bool) {
	s := l.hot.state.Load()
	if s&slowBit == 0 {
		return sluice.ReasonLimit, l.maxQueue == 0 && s&inFlightMask >= s>>limitShift&limitMask
	}
	return sluice.ReasonQueueFull, l.maxQueue > 0 && !l.evicts && l.queued.Load() >= l.maxQueue
}

// rejectFast counts and returns a rejection decided without the lock. The
// retry-after hint is the mean time between permits freeing up, as the
// Core gives it.
func (l *Limiter) rejectFast(r sluice.Reason) error {
	l.counters.Reject(r)
	limit := int64(l.hot.state.Load() >> limitShift & limitMask)
	return sluice.Reject(r, time.Duration(l.meanSvc.Load()/max(limit, 1)))
}
