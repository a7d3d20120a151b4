package concurrency

// The wide fast path.
//
// Far from the limit, admission is one atomic add: the acquirer adds 1 to
// the in-flight count and 1 to the admission count of the state word
// without reading it first, and keeps the permit if the word it produced
// is open (slowBit clear) and within the limit. Under contention this is
// one coherence transaction on the word's line, where a load and a CAS are
// two, and it never retries: the CAS fails whenever another core's acquire
// or release lands between the load and the CAS.
//
// An add that produced a closed or overfull word reserved what it may not
// keep (a phantom). Safety does not depend on phantoms being rare: a
// reservation is kept only when the word it produced, which counts every
// permit held and every phantom not yet given back, is open and within the
// limit, so the permits held never exceed the limit. The caller gives the
// phantom back (unreserve) and takes the exact path (load and CAS, then
// the Core under mu), which decides as if it had not tried; so a caller is
// never rejected because its own add overshot.
//
//   - slowBit set in the produced word: the add landed while the Core is
//     the truth, on the word's mirror of the Core's count. Every leave
//     overwrites that mirror and slowBit is cleared only by a leave, so a
//     later leave erases the in-flight part; taking it back instead could
//     decrement a count a leave published meanwhile, and the word would
//     fall below the permits still to be released, which releaseFast's
//     copied-permit guard relies on it never doing. Only the admission
//     count, which leave keeps, is taken back. Until that leave the mirror
//     over-reports, so Stats reports the Core's count (Limiter.inFlight)
//     while slowBit is set.
//   - open but over the limit: the in-flight part is counted as a permit
//     held, and enter may already have copied it into the Core. It is given
//     back exactly as a cancelled permit is (Cancel): one add
//     if the word is still open, the Core under mu if enter copied it.
//
// Phantoms are kept rare, not just harmless, because while one is pending
// the word over-reports: a caller deciding on the word (fullFast, or the
// Core after enter copies it) could be rejected for a permit nobody holds,
// Stats could count for an instant an admission that is then taken back,
// and a mirror raised without bound would carry into the limit bits. So
// the wide path is used only while Limiter.wide is set, which asks for the
// word to be open with at least margin permits free and the count far
// from overflow. A phantom then needs margin callers at once between their
// read of wide and their add, or the word closing in that instant (enter
// clears wide after closing it, and wide stays clear while it is closed):
// phantoms are bounded by the callers racing, not by the calls made.
//
// The count and flushes: a phantom's admission is in the count until it
// is taken back, so a flush (see flush) moves half of flushAt once the
// count reaches flushAt, which leaves more in the word than any number of
// phantoms short of flushAt/2 will take back.
//
// wide is a separate, read-mostly flag, not a bit of the word: reading the
// word before adding to it is the transaction the wide path saves. It is
// cleared by enter, by an admission that leaves fewer than margin permits
// free or a large unflushed count, and by any phantom. It is set by leave,
// and by one release in 64 (by the admission count, like the latency
// sample: reading wide on every release costs), when the word is open with
// 2×margin permits free; the hysteresis keeps a workload near the
// threshold from writing it on every call. A release checks the word again
// once wide is set and clears it if the word no longer allows it:
// otherwise a release racing with enter could leave wide set on a closed
// word for as long as the Core stays the truth (enter clears it after
// closing the word, so one of the two sees the other), and one delayed
// between its add and its store could set it near the limit.

// defaultMargin is Limiter.margin: limits below 2×defaultMargin always take
// the exact path.
const defaultMargin = 64

// Acquire and TryAcquire make the wide path's admission inline: one add
// of 1+countOne to the word, kept at once if keeps says so, and otherwise
// handed to reserved.

// keeps reports whether a reservation that produced word n is the common
// case: open, margin permits still free, no flush due. The count is below
// flushAt when its top bit (flushBit) is clear, so one mask tests both bits.
func (l *Limiter) keeps(n uint64) bool {
	return n&(slowBit|flushBit) == 0 && n&inFlightMask+l.margin <= n>>limitShift&limitMask
}

// flushBit is the count's top bit, set from flushAt admissions on.
const flushBit = flushAt * countOne

// The count field is two flushAt wide, so flushBit is its top bit.
var _ = [1]struct{}{}[countMask+1-2*flushAt]

// reserved finishes a reservation that produced word n outside the common
// case (see keeps): it keeps the permit if n allows, turning the wide path off
// near the limit and flushing a due count, and gives it back otherwise.
func (l *Limiter) reserved(n uint64) (uint64, bool) {
	w, limit := n&inFlightMask, n>>limitShift&limitMask
	if n&slowBit != 0 || w > limit {
		l.unreserve(n)
		return 0, false
	}
	c := n >> countShift & countMask
	if limit-w < l.margin || c >= flushAt+flushAt/2 {
		l.setWide(false)
	}
	if c >= flushAt {
		l.flush()
	}
	return w, true
}

// unreserve gives back a phantom: an add that produced word n, closed or
// over the limit (see above).
func (l *Limiter) unreserve(n uint64) {
	l.setWide(false)
	l.hot.state.Add(^uint64(countOne - 1)) // -countOne: leave keeps the count
	if n&slowBit == 0 {
		(*releaser)(l).Cancel(n & inFlightMask)
	}
}

// flush moves flushMove admissions from the word's count to
// Limiter.flushed if the count has reached flushAt and no flush is under
// way (pendingBit). It moves half of flushAt, not all of it: a pending
// phantom's admission is in the count until taken back, and the count must
// stay above what phantoms will take back.
func (l *Limiter) flush() {
	for {
		s := l.hot.state.Load()
		if s&pendingBit != 0 || s>>countShift&countMask < flushAt {
			return
		}
		if l.hot.state.CompareAndSwap(s, s-flushMove*countOne|pendingBit) {
			l.flushed.Add(flushMove)
			l.hot.state.And(^uint64(pendingBit))
			return
		}
	}
}

// widens reports whether word s lets the wide path reopen: open, 2×margin
// permits free, and the count well below overflow.
func (l *Limiter) widens(s uint64) bool {
	return s&slowBit == 0 && s>>countShift&countMask < flushAt &&
		s&inFlightMask+2*l.margin <= s>>limitShift&limitMask
}

// widen sets wide after a release if the word allows it, and clears it
// again if, by the time it is set, the word no longer does (see above).
func (l *Limiter) widen(s uint64) {
	if !l.widens(s) {
		return
	}
	l.wide.Store(true)
	if !l.widens(l.hot.state.Load()) {
		l.wide.Store(false)
	}
}

// setWide sets wide to v, writing only if it changes: every fast acquire
// reads it, so its line should stay shared.
func (l *Limiter) setWide(v bool) {
	if l.wide.Load() != v {
		l.wide.Store(v)
	}
}
