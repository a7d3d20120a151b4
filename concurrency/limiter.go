package concurrency

import (
	"context"
	"strconv"
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
// release every permit once with the work's outcome and latency: the
// latency teaches the limiter how long permits are held, which it uses to
// reject at once a caller whose deadline is out of reach (see Core), and
// with an Algorithm, Success and Dropped drive the limit.
//
// The common case, a permit free and nobody queued, is one atomic add to
// acquire and one to release, allocation-free; close to the limit (from
// fewer than 64 permits free until 128 are free again, and always with a
// limit below 128) the acquire is a load and a CAS instead. A queued caller costs a mutex-held decision and
// a pooled channel. One timer, armed for the queue's head,
// enforces every wait bound.
//
// A Limiter is safe for concurrent use. Create it with New.
type Limiter struct {
	// The fields up to the padding are read by every fast acquire and
	// release and written rarely or never, so their cache line stays
	// shared by every core; nothing the fast path writes may share it.

	// hot holds the fast path's word (see state.go), alone in its cache
	// line.
	hot *hot
	// wide lets acquirers try the one-add path (see reserve.go). It
	// changes only when the word nears or leaves its limit, or closes.
	wide atomic.Bool
	// margin is the number of free permits below which the wide path is
	// off; defaultMargin, lowered by tests to hammer the boundary.
	margin uint64
	// noAlgorithm reports that a release may skip the Core when nobody is
	// queued: there is no Algorithm to feed.
	noAlgorithm bool
	// timed is core.timed(): decisions read the clock.
	timed bool
	// maxQueue is Config.MaxQueue; evicts reports that a full queue may
	// drop its oldest waiter for a newcomer (LIFO order), so a full queue
	// does not always reject the newcomer.
	maxQueue int64
	evicts   bool
	// cache holds released permits for the next acquires (cache.go); nil
	// until the first release that caches.
	cache atomic.Pointer[permitCache]
	_     [64]byte

	// flushed and slowAdmitted count admissions with hot's count bits.
	flushed      atomic.Uint64
	slowAdmitted atomic.Uint64
	counters     counter.Counters // rejections
	queued       atomic.Int64     // mirror of core.Queued for Stats
	// inFlight is core.inFlight as of the last leave, which Stats reports
	// while the Core is the truth: the word's count is then only a mirror,
	// raised by reservations that leave will erase (see reserve.go).
	inFlight atomic.Int64
	// meanSvc is the Core's service-time estimate while the fast path is
	// open (see releaseFast and enter); ns.
	meanSvc atomic.Int64

	mu   sync.Mutex
	core Core
	// waiters[i] is the caller waiting in the Core's queue slot i.
	waiters []*waiter
	// expiry fires at the queue head's wait bound (see armExpiry);
	// expiryAt is when it is armed for, 0 if it is not.
	expiry   *time.Timer
	expiryAt int64
	// pool holds waiters (their channels) for reuse. It is per Limiter,
	// not a sync.Pool: a channel must not cross testing/synctest bubbles.
	pool []*waiter
}

// New returns a Limiter configured by cfg, or an error naming the invalid
// field (a *sluice.ConfigError, matching sluice.ErrInvalidConfig).
func New(cfg Config) (*Limiter, error) {
	l := &Limiter{hot: new(hot), margin: defaultMargin}
	if err := l.core.init(cfg); err != nil {
		return nil, err
	}
	l.noAlgorithm = l.core.cfg.Algorithm == nil
	l.maxQueue = int64(l.core.cfg.MaxQueue)
	l.evicts = l.core.cfg.Discipline == LIFO || l.core.cfg.Discipline == AdaptiveLIFO
	l.timed = l.core.timed()
	l.hot.state.Store(uint64(l.core.limit) << limitShift)
	l.wide.Store(l.widens(l.hot.state.Load()))
	return l, nil
}

// releaser is the Limiter as seen by its permits; a distinct type keeps
// Release out of Limiter's method set.
type releaser Limiter

// Acquire returns a permit when one is free, waits for one in the queue, or
// rejects. A rejection is a *sluice.RejectError with the reason: ReasonLimit
// (no free permit and no queue), ReasonQueueFull, ReasonQueueTimeout (MaxWait
// or MaxWaitServices passed), ReasonShed (CoDel) or ReasonDeadline (ctx's deadline is sooner
// than the estimated wait, or, when a permit comes free, too close for the
// work to finish in a mean service time: it is passed over). If ctx ends first, Acquire returns ctx.Err() and
// the caller's place in the queue is freed at once.
func (l *Limiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err // Err, not Done: a context may make its channel lazily
	}
	if p, ok := l.fromCache(false); ok {
		return p, nil
	}
	if l.wide.Load() {
		n := l.hot.state.Add(1 + countOne)
		if l.keeps(n) {
			return sluice.NewPermit((*releaser)(l), n&inFlightMask), nil
		}
		if t, ok := l.reserved(n); ok {
			return sluice.NewPermit((*releaser)(l), t), nil
		}
	}
	if s := l.hot.state.Load(); fastAdmit(s) && l.hot.state.CompareAndSwap(s, s+1+countOne) {
		return sluice.NewPermit((*releaser)(l), s&inFlightMask+1), nil
	}
	if t, ok := l.tryFast(); ok {
		return sluice.NewPermit((*releaser)(l), t), nil
	}
	if p, ok := l.fromCache(true); ok {
		return p, nil
	}
	if r, ok := l.fullFast(); ok {
		return sluice.Permit{}, l.rejectFast(r)
	}
	return l.acquireSlow(ctx)
}

// TryAcquire returns a permit if one is free and nobody is queued (it never
// jumps the queue), and otherwise rejects with sluice.ReasonLimit. It never
// waits.
//
// Its first lines repeat Acquire's fast path on purpose: factored into a
// method returning (token, ok) it cost TryAcquire about a quarter of its
// time in the side-by-side benchmark (bench/, ConcurrencyUncontended).
func (l *Limiter) TryAcquire() (sluice.Permit, error) {
	if p, ok := l.fromCache(false); ok {
		return p, nil
	}
	if l.wide.Load() {
		n := l.hot.state.Add(1 + countOne)
		if l.keeps(n) {
			return sluice.NewPermit((*releaser)(l), n&inFlightMask), nil
		}
		if t, ok := l.reserved(n); ok {
			return sluice.NewPermit((*releaser)(l), t), nil
		}
	}
	if s := l.hot.state.Load(); fastAdmit(s) && l.hot.state.CompareAndSwap(s, s+1+countOne) {
		return sluice.NewPermit((*releaser)(l), s&inFlightMask+1), nil
	}
	if t, ok := l.tryFast(); ok {
		return sluice.NewPermit((*releaser)(l), t), nil
	}
	if p, ok := l.fromCache(true); ok {
		return p, nil
	}
	if s := l.hot.state.Load(); s&slowBit != 0 && l.queued.Load() > 0 || s&slowBit == 0 && s&inFlightMask >= s>>limitShift&limitMask {
		// A queue, or every permit held: reject without the lock (it would
		// say the same, barring a release this instant).
		return sluice.Permit{}, l.rejectFast(sluice.ReasonLimit)
	}
	l.mu.Lock()
	l.enter()
	a := l.core.TryArrive()
	l.leave()
	l.mu.Unlock()
	return l.verdict(a)
}

// Cancel implements sluice.Releaser: the slot is freed without a sample.
func (r *releaser) Cancel(token uint64) { r.release(token, canceled, 0) }

// Release implements sluice.Releaser for the Limiter's permits.
func (r *releaser) Release(token uint64, o sluice.Outcome, latency time.Duration) {
	if o > sluice.Ignore {
		o = sluice.Ignore
	}
	r.release(token, o, latency)
}

func (r *releaser) release(token uint64, o sluice.Outcome, latency time.Duration) {
	l := (*Limiter)(r)
	if l.noAlgorithm || o == sluice.Ignore || o == canceled {
		if l.toCache(o, latency) || l.releaseFast(o, latency) {
			return
		}
	}
	l.releaseCore(token, o, latency)
}

// releaseCore releases a permit through the Core, under mu.
func (l *Limiter) releaseCore(token uint64, o sluice.Outcome, latency time.Duration) {
	var now int64
	if l.timed {
		now = clock.Nanos()
	}
	l.mu.Lock()
	// Deferred because release runs the Algorithm, which may be anyone's
	// code: if it panics and the caller recovers (net/http does), a mutex
	// left locked would hang every later Acquire, whatever its context,
	// and the waiters the Core granted the freed permit to (it grants even
	// then) must still be told.
	defer func() {
		l.dispatch()
		l.leave()
		l.mu.Unlock()
	}()
	l.enter()
	if !l.timed && l.core.q.deadlined > 0 {
		now = clock.Nanos()
	}
	l.core.release(now, token, o, latency)
}

// SetLimit sets the limit. Growing it admits waiters at once; shrinking it
// revokes nothing: permits held above the new limit stay held until
// released, and no new one is granted until in flight drops below it. With
// an Algorithm, its next sample overrides the limit set here. An n out of
// range is a *sluice.ConfigError.
func (l *Limiter) SetLimit(n int) error {
	if n < 1 || n > MaxLimit {
		return invalid("SetLimit(n)", n, "must be 1 to "+strconv.Itoa(MaxLimit))
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
	st, admitted := l.snapshot()
	s := sluice.Stats{
		Limit:    float64(st >> limitShift & limitMask),
		InFlight: int(st & inFlightMask),
		Queued:   int(l.queued.Load()),
	}
	held, fromCache := l.cached()
	admitted += fromCache
	if st&slowBit != 0 {
		s.InFlight = int(l.inFlight.Load())
	} else if held > 0 && (s.InFlight > held || !l.admittedSince(admitted)) {
		s.InFlight -= held // held by the cache, not by a caller (cache.go)
	}
	// Otherwise InFlight stays the word's count, which counts the cache's
	// permits as held: too many, never too few. The word and the cache
	// are read one after the other, so a permit taken from the word after
	// it was read and cached before the cache was (or moved from a stripe
	// already read to one not yet read) is taken off a count it is not
	// on, and a limiter whose permit is held all along can say 0, which
	// keyed.Map takes for idle and evicts. That needs an admission between the
	// readings; without one the permits held only fall, and the word's
	// count less the cache's is at least those held throughout. (An
	// admission taken back meanwhile, a phantom or a cached permit given
	// back, can hide one: both at once are rare.)
	l.counters.Fill(&s)
	s.Admitted = admitted
	return s
}

// admittedSince reports whether Stats would count other admissions than n
// now (more, or fewer when one was taken back meanwhile).
func (l *Limiter) admittedSince(n uint64) bool {
	_, a := l.snapshot()
	_, c := l.cached()
	return a+c != n
}

// verdict turns an arrival that was not queued into Acquire's result.
func (l *Limiter) verdict(a Arrival) (sluice.Permit, error) {
	if a.Verdict == Admitted {
		l.slowAdmitted.Add(1)
		return sluice.NewPermit((*releaser)(l), a.Token), nil
	}
	l.counters.Reject(a.Reason)
	return sluice.Permit{}, sluice.Reject(a.Reason, a.RetryAfter)
}
