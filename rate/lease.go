package rate

import (
	"runtime"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/counter"
	"github.com/sluicehq/sluice/internal/gcra"
)

// Leases: admission that scales with cores.
//
// A bucket's state is one word, and every admission must write it: under
// contention each admission moves that word's cache line from core to core
// (about 50 ns on a 2-core Xeon VM, more across sockets), whatever the
// arithmetic costs. So once two cores collide on the word (a failed CAS), a
// bucket with a large burst splits: the word keeps Burst−P tokens and a set
// of stripes (picked by the caller's goroutine stack address, as the
// counters are) holds up to P = stripes×leaseSize more, at most leaseSize
// each. A caller takes a token from its stripe with a CAS on a line no
// other core writes; a caller whose stripe is empty takes leaseSize tokens
// from the word in one CAS (a lease), uses one and leaves the rest in its
// stripe. One admission in leaseSize writes the shared word.
//
// Why that never admits more than the bucket would: the word alone is a
// bucket of burst Burst−P, so in any window [a, b] it admits at most
// Burst−P + rate·(b−a) tokens (leases taken inside the window included),
// and the stripes can add at most the P tokens they held at a. Leased tokens
// never expire, so the bucket's promise (at most Burst at once, rate on
// average) holds however long they wait.
//
// Why it does not admit less: a lease is taken only while the word keeps
// at least P tokens besides, so tokens are parked only when there are
// plenty; a live request the word cannot pay at once, or a single token
// whose stripe is empty while the word is too short to lease, joins the
// stripes back into the word (a setter's drain, exact) and decides on the
// whole bucket; Tokens counts the stripes' tokens. A drained bucket is so
// one word again, and refills to Burst while idle (its word alone topped
// out at Burst−P, 9984 of 10240 on 2 cores, and its first request for more
// was refused). A setter drains the stripes too; a rebase (the same config)
// hands them on. A refund fills the stripes' room before the word's (see
// giveLeased).
//
// One case still admits less: a bucket left idle while its stripes hold H
// tokens, 0 < H < P, holds Burst−P+H until a request for more is refused
// and joins them. Nothing records when a stripe admitted (a clock read on
// the path that exists to avoid one), and the same state right after those
// admissions must offer no more (TestLeaseRecentStripeAdmissionsCount).
const leaseSize = 32

// refilling marks a stripe whose lease is being taken from the word: in
// that instant its tokens are in neither, and a search that found both the
// word and the stripes empty would refuse wrongly (TestNoAdmissionAfterARefusal
// saw the 31 tokens of a preempted refill admitted after a refusal). A
// search waits a marked stripe out, and so does a drain.
const refilling = -1

// lease is one stripe's tokens, on its own pair of cache lines (Intel's
// adjacent-line prefetcher moves lines in pairs).
type lease struct {
	n atomic.Int64
	_ [128 - 8]byte
}

// leaseSet is a state's stripes.
//
// A single-token rejection at a far time (takeFar) reads every stripe (256
// lines on 64 cores; no writes); elsewhere a rejection joins them. A hint that
// spared the walk ("a stripe may hold a token", cleared by a search about
// to walk) refused wrongly: while one search ran, every other rejection read
// the hint cleared and refused with tokens still parked (hundreds of wrong
// refusals a run in TestNoAdmissionAfterARefusal).
type leaseSet struct {
	s []lease // never written after the set is made
}

// stripes is the size of a new set: 4 stripes a core (so that goroutines
// on different cores rarely share one), 8 to 256.
func stripes() int { return counter.Stripes(4, 8) }

func newLeaseSet() *leaseSet { return &leaseSet{s: make([]lease, stripes())} }

// parked is the most the stripes of ls hold.
func (ls *leaseSet) parked() int64 { return int64(len(ls.s)) * leaseSize }

// mayLease reports whether state s may split into a word and stripes: a
// refilling bucket whose burst is at least 4 times what a new set parks
// (1,024 tokens on up to 2 cores, 8,192 on 16, 32,768 from 64 on), so
// the word keeps most of it.
func (s *state) mayLease() bool { return s.mayLeaseParking(int64(stripes()) * leaseSize) }

// mayLeaseParking is mayLease for a new set that parks p tokens.
func (s *state) mayLeaseParking(p int64) bool {
	return s.Mode == gcra.Rate && s.ls.Load() == nil && s.burst >= 4*p
}

// collided splits s, on whose word w two cores collided at u, if it may
// and its word holds twice what a new set parks: a split then leases for a
// while before the word runs short of a lease and the bucket joins again
// (see join). A drained bucket that split on every collision made a set
// and dropped it at once.
//
// It runs on every collision of a bucket that may not split, so it asks
// the runtime for GOMAXPROCS (a global lock) once, and only for a bucket
// that is not split already.
func (b *Bucket) collided(s *state, w, u int64) {
	if s.Mode != gcra.Rate || s.ls.Load() != nil {
		return
	}
	if p := int64(stripes()) * leaseSize; s.mayLeaseParking(p) && s.Tokens(w, u) >= float64(2*p) {
		b.startLeasing(s)
	}
}

// join puts the stripes back into the word (a setter's drain: exact), and
// returns the time to decide anew at. takeNanos joins a drained bucket, one
// whose word is too short to lease: the stripes then only hold leftovers,
// and a split bucket left idle refilled its word alone, to Burst−P, so its
// first request for more was refused. Leasing resumes on a collision with
// tokens to spare (see collided).
func (b *Bucket) join(t int64, live bool) int64 {
	_ = b.reconfigure(t, live, func(*Config) {}) // the same config: valid
	if live {
		return clock.Nanos() // not before the new state's base
	}
	return t
}

// stripe returns the calling goroutine's stripe.
func (ls *leaseSet) stripe() *lease {
	return &ls.s[counter.Probe()&uintptr(len(ls.s)-1)]
}

// take takes a token from the caller's stripe, or, if all is set (a
// rejection at a far time), from any stripe, once no lease is on its way
// to one. It returns the caller's stripe and whether that stripe was empty.
func (ls *leaseSet) take(all bool) (l *lease, empty, ok bool) {
	l = ls.stripe()
	if takeOne(l) {
		return l, false, true
	}
	for all {
		all = false
		for i := range ls.s {
			if takeOne(&ls.s[i]) {
				return l, true, true
			}
			if ls.s[i].n.Load() == refilling {
				all = true
			}
		}
		if all {
			runtime.Gosched() // let the refill publish its tokens
		}
	}
	return l, true, false
}

func takeOne(l *lease) bool {
	for {
		v := l.n.Load()
		if v <= 0 {
			return false
		}
		if l.n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// put parks up to n tokens in stripes with room, the caller's first, and
// returns how many did not fit. A stripe being refilled is skipped: its
// lease is on its way. The caller holds b.mu, so ls is not being drained.
func (ls *leaseSet) put(n int64) int64 {
	n = putIn(ls.stripe(), n)
	for i := range ls.s {
		if n == 0 {
			break
		}
		n = putIn(&ls.s[i], n)
	}
	return n
}

func putIn(l *lease, n int64) int64 {
	for n > 0 {
		v := l.n.Load()
		if v < 0 || v >= leaseSize {
			return n
		}
		if k := min(n, leaseSize-v); l.n.CompareAndSwap(v, v+k) {
			return n - k
		}
	}
	return n
}

// held returns the tokens the stripes hold.
func (ls *leaseSet) held() int64 {
	var n int64
	for i := range ls.s {
		n += max(ls.s[i].n.Load(), 0)
	}
	return n
}

// drain empties the stripes of a retired state and returns the tokens they
// held. It waits out a lease on its way to a stripe: the word has paid it
// already, so its tokens reach the next state only through the stripe
// (zeroing the mark dropped them, 31 a lease). Once drained, a stripe gets
// no tokens again: a refill's CAS on the retired word fails, and a refund
// goes to the current set.
func (ls *leaseSet) drain() int64 {
	var n int64
	for i := range ls.s {
		for {
			v := ls.s[i].n.Load()
			if v == refilling {
				runtime.Gosched()
			} else if ls.s[i].n.CompareAndSwap(v, 0) {
				n += v
				break
			}
		}
	}
	return n
}

// leasedGrant completes an admission that took a token from a stripe. It
// stands even if the set has been drained since: the token was gone from
// its stripe before the drain counted it, so no one else has it. (Dropping
// it, and taking another, lost a token each time a setter met a caller
// there.)
func (b *Bucket) leasedGrant(count bool) grant {
	if count {
		b.c.Admit()
	}
	return grant{taken: 1, ok: true}
}

// refill takes a lease of leaseSize tokens from word w of s at u for the
// caller's empty stripe l and admits the caller with one of them. It takes
// nothing (!ok) if the word moved or another caller refills l, or if the
// word would keep fewer than the parked maximum besides (short: drained).
func (b *Bucket) refill(s *state, w, u int64, ls *leaseSet, l *lease, count bool) (g grant, ok, short bool) {
	nw, wu, ok := s.Take(w, u, leaseSize, 0)
	if !ok || wu > 0 || s.Tokens(nw, u) < float64(ls.parked()) {
		return grant{}, false, true
	}
	if !l.n.CompareAndSwap(0, refilling) {
		return grant{}, false, false // another caller on this stripe refills it
	}
	if !s.word.CompareAndSwap(w, nw) {
		l.n.Store(0)
		return grant{}, false, false
	}
	l.n.Store(leaseSize - 1) // a drain waits for this (see drain)
	if count {
		b.countAdmit(s)
	}
	return grant{taken: 1, ok: true}, true, false
}

// startLeasing replaces s, on which two cores collided, by the same bucket
// split into a word and stripes (see above), tokens carried over exactly.
func (b *Bucket) startLeasing(s *state) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st.Load() != s || !s.mayLease() {
		return
	}
	ls := newLeaseSet()
	ns := &state{params: s.params, base: s.base}
	ns.Burst -= ls.parked()
	ns.Tau = ns.Burst * ns.Interval
	w, _ := b.retire(s, false)
	// The tokens above the word's new burst go to the stripes.
	extra := int64(s.TokensFar(w, s.base, clock.Nanos())) - ns.Burst
	for i := range ls.s {
		if extra <= 0 {
			break
		}
		ls.s[i].n.Store(min(extra, leaseSize))
		extra -= leaseSize
	}
	ns.word.Store(w)
	ns.ls.Store(ls)
	b.st.Store(ns)
}
