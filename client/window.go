package client

// window counts two quantities over a sliding time window split into a ring
// of equal buckets. Time is an argument (nanoseconds on any monotonic scale),
// so the same code runs on the real clock and in the simulator's virtual time.
//
// The window covers between len(ring)-1 and len(ring) bucket widths: a bucket
// leaves whole when time moves past it. More buckets make the edge smoother at
// the cost of 16 bytes each.
//
// window is not safe for concurrent use; its owner holds a lock.
type window struct {
	width  int64    // bucket width in nanoseconds, > 0
	ring   []bucket // ring[idx(n)] holds absolute bucket number n
	newest int64    // absolute number of the newest bucket
	sum    bucket   // totals over the ring
	seen   bool     // newest is meaningful
}

type bucket struct{ a, b int64 }

func newWindow(span int64, buckets int) window {
	return window{width: span / int64(buckets), ring: make([]bucket, buckets)}
}

// number returns the absolute bucket number of time t (floor division, so
// times before the epoch, as virtual clocks may use, land correctly).
func (w *window) number(t int64) int64 {
	q := t / w.width
	if t%w.width != 0 && t < 0 {
		q--
	}
	return q
}

func (w *window) idx(n int64) int {
	m := n % int64(len(w.ring))
	if m < 0 {
		m += int64(len(w.ring))
	}
	return int(m)
}

// advance slides the window so that time t falls in its newest bucket,
// clearing the buckets that left it. Earlier times do not move the window.
func (w *window) advance(t int64) {
	n := w.number(t)
	if !w.seen {
		w.newest, w.seen = n, true
		return
	}
	if n <= w.newest {
		return
	}
	// Unsigned: n > newest, so the difference is exact even where the
	// signed one overflows (1 ns buckets span the whole int64 range, and
	// a clearing loop over it would not end).
	if uint64(n)-uint64(w.newest) >= uint64(len(w.ring)) {
		clear(w.ring)
		w.sum = bucket{}
	} else {
		for k := w.newest + 1; k <= n; k++ {
			i := w.idx(k)
			w.sum.a -= w.ring[i].a
			w.sum.b -= w.ring[i].b
			w.ring[i] = bucket{}
		}
	}
	w.newest = n
}

// add adds da and db to the bucket of time t. A time that already left the
// window is dropped: what it would have counted has expired. Counts never go
// below zero, so a late decrement cannot corrupt the totals.
func (w *window) add(t int64, da, db int64) {
	w.advance(t)
	n := w.number(t)
	if n <= w.newest-int64(len(w.ring)) {
		return
	}
	bk := &w.ring[w.idx(n)]
	da = max(da, -bk.a)
	db = max(db, -bk.b)
	bk.a += da
	bk.b += db
	w.sum.a += da
	w.sum.b += db
}

// totals returns the sums over the window as of time t.
func (w *window) totals(t int64) (a, b int64) {
	w.advance(t)
	return w.sum.a, w.sum.b
}
