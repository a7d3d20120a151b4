package concurrency

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/counter"
)

// The permit cache: acquire and release that scale with cores.
//
// The wide path costs one add on the state word to acquire and one to
// release; under contention each moves the word's cache line between cores
// (about 50 ns on a 2-core Xeon VM), and a mutex that makes one core wait
// (x/sync/semaphore) does better. So while the wide path is on, a release
// that would add to the word instead leaves its permit in its stripe of a
// cache (picked by the goroutine's stack address, as the counters are), and
// an acquire first takes a permit from its stripe: a CAS on a line no other
// core writes. The word is not written at all while goroutines acquire and
// release on their own stripes.
//
// A cached permit is still counted in the word's in-flight count: it is
// held by the cache. So the word never under-counts (the limit holds), and
// the cost is the other way: a caller whose stripe is empty may find the
// word full while other stripes hold free permits. Hence:
//   - a release caches only while wide is set (margin permits free), so
//     near the limit permits go back to the word;
//   - a caller that would be refused or queued first takes a permit from
//     any stripe (a read of each, no write unless it finds one);
//   - enter, which makes the Core the truth, drains the cache and takes
//     what it held off the Core's in-flight count, so queued callers are
//     decided on the exact count; a release that cached while enter closed
//     the word takes its stripe back and releases through the Core;
//   - so a permit can sit in the cache for an instant after enter, and
//     one can stay there after the word reopens with a lower limit: an
//     acquirer keeps a cached permit only if the word is then open and
//     within its limit, and gives it back otherwise.
// Stats reports the word's count minus what the cache holds, or the
// word's count if that says idle while admissions raced with its reading.
//
// A copied Permit released twice (a caller's bug) can leave one more
// permit in the cache than the word counts, letting in flight exceed the
// limit by one per double release until the next enter drains the cache.

// cacheMax is the most permits one stripe holds.
const cacheMax = 8

// stripe is one goroutine group's cached permits (the low 8 bits of w)
// and the admissions made from them (the rest: 2^56 of them before it
// wraps), in one word so that taking a permit and counting it is one CAS,
// on its own pair of cache lines.
type stripe struct {
	w atomic.Uint64
	_ [128 - 8]byte
}

const (
	heldMask = 1<<8 - 1
	admitOne = 1 << 8
)

// permitCache is the stripes and two hints that spare a search or a drain
// from touching every stripe (256 lines on 64 cores) when none holds a
// permit. A release sets both after caching and before checking the word;
// a search clears maybe before looking at every stripe (a release that
// caches behind it sets it again), and only a drain clears drainable, so a
// permit cached while the word is open is always drained.
type permitCache struct {
	s         []stripe // never written after the cache is made
	_         [128 - 24]byte
	maybe     atomic.Bool
	drainable atomic.Bool
}

// newCache returns a cache of 4 stripes a core (so that goroutines on
// different cores rarely share one), 8 to 256.
func newCache() *permitCache {
	return &permitCache{s: make([]stripe, counter.Stripes(4, 8))}
}

func (c *permitCache) mine() *stripe { return &c.s[counter.Probe()&uintptr(len(c.s)-1)] }

// takeOne takes a cached permit from s and counts the admission.
func takeOne(s *stripe) bool {
	for {
		v := s.w.Load()
		if v&heldMask == 0 {
			return false
		}
		if s.w.CompareAndSwap(v, v-1+admitOne) {
			return true
		}
	}
}

// takeAll empties s and returns the permits it held, keeping its count.
func takeAll(s *stripe) int {
	for {
		v := s.w.Load()
		if v&heldMask == 0 || s.w.CompareAndSwap(v, v&^heldMask) {
			return int(v & heldMask)
		}
	}
}

// fromCache admits with a permit from the caller's stripe, or with all
// set (before refusing or queueing) from any stripe.
func (l *Limiter) fromCache(all bool) (sluice.Permit, bool) {
	c := l.cache.Load()
	if c == nil {
		return sluice.Permit{}, false
	}
	s := c.mine()
	ok := takeOne(s)
	if !ok && all && c.maybe.Load() {
		c.maybe.Store(false)
		for i := 0; !ok && i < len(c.s); i++ {
			s = &c.s[i]
			ok = takeOne(s)
		}
		if ok {
			c.maybe.Store(true) // others may be left
		}
	}
	if !ok {
		return sluice.Permit{}, false
	}
	// A permit may be cached by a release that read wide before enter
	// closed the word and cached after enter drained the cache. If the
	// word is still closed, a caller may be queued: the release takes the
	// permit back for the Core once it sees that (toCache), and an
	// acquirer that finds it first must not jump the queue with it. If
	// the word has reopened, its limit may have been lowered below the
	// permits it counts (SetLimit, an Algorithm): then the permit is one
	// over the limit. Either way it is given back as a cancelled permit
	// is, and the admission uncounted; as with the wide path, the caller
	// keeps a permit only if the word is open and within its limit.
	w := l.hot.state.Load()
	if w&slowBit != 0 || w&inFlightMask > w>>limitShift&limitMask {
		s.w.Add(^uint64(admitOne - 1)) // -admitOne
		if !l.releaseFast(canceled, 0) {
			l.releaseCore(0, canceled, 0)
		}
		return sluice.Permit{}, false
	}
	// The token is the permits in flight, this one included, as far as
	// the word knows (it counts the cache's permits as held).
	return sluice.NewPermit((*releaser)(l), w&inFlightMask), true
}

// toCache caches a released permit if the wide path is on and the caller's
// stripe has room, and reports whether it did.
func (l *Limiter) toCache(o sluice.Outcome, latency time.Duration) bool {
	if !l.wide.Load() {
		return false
	}
	c := l.cache.Load()
	if c == nil {
		l.cache.CompareAndSwap(nil, newCache())
		c = l.cache.Load()
	}
	s := c.mine()
	v := s.w.Load()
	if v&heldMask >= cacheMax || !s.w.CompareAndSwap(v, v+1) {
		return false
	}
	if !c.drainable.Load() {
		c.drainable.Store(true)
	}
	if !c.maybe.Load() {
		c.maybe.Store(true)
	}
	if l.hot.state.Load()&slowBit != 0 {
		// enter closed the word meanwhile and may have drained the
		// stripe before this permit arrived: take back what is there and
		// release it through the Core, which counts it as held.
		for k := takeAll(s); k > 0; k-- {
			l.releaseCore(0, canceled, 0)
		}
		return true
	}
	if (v/admitOne)&63 == 0 && o != canceled && latency > 0 {
		l.sample(latency)
	}
	return true
}

// drainCache empties the cache and returns the permits it held. Call with
// mu held, from enter, once the word is closed.
func (l *Limiter) drainCache() int {
	c := l.cache.Load()
	if c == nil || !c.drainable.Load() {
		return 0
	}
	c.drainable.Store(false)
	n := 0
	for i := range c.s {
		n += takeAll(&c.s[i])
	}
	return n
}

// cached returns the permits the cache holds and the admissions made from
// it, for Stats.
func (l *Limiter) cached() (held int, admitted uint64) {
	c := l.cache.Load()
	if c == nil {
		return 0, 0
	}
	for i := range c.s {
		v := c.s[i].w.Load()
		held += int(v & heldMask)
		admitted += v / admitOne
	}
	return held, admitted
}
