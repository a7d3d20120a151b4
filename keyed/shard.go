package keyed

import (
	"math"
	"sync"
	"sync/atomic"
)

// How much of a shard one insertion sweeps. Every insertion looks at
// sweepStep slots for idle keys, so that reclaiming idle keys keeps pace with
// new ones; an insertion into a full table looks at up to fullSweepStep
// slots of its shard before it gives up and overflows. Both bound the time
// the shard's lock is held, whatever the number of keys: there is no sweep
// over the whole map.
const (
	sweepStep     = 4
	fullSweepStep = 64
)

// minSlots is the smallest slot array a shard keeps once it has a key.
const minSlots = 8

// retired marks a slot's word as no longer the key's: the key was evicted
// (a tombstone) or its index was replaced and the word copied to the new
// one. No real word is ever retired (see gcra.Retired; a Map clamps its
// times above it), so a reader's compare-and-swap on a retired word fails
// and the reader looks again, under the lock.
const retired = math.MinInt64

// slot is one key in a shard's open-addressing table. A key is known by its
// 64-bit hash under the table's secret seed (see table.hash), not by its
// bytes: the hash, the word and the value sit together, so that a lookup
// touches one cache line, and a Buckets admission updates the word next to
// the hash it just matched.
//
// A slot is filled once (v and last, then h, which publishes them) and
// never given to another key: an evicted key leaves a tombstone (its word
// retired, h kept) until the shard's index is rebuilt. So a reader that
// matched h reads that key's v and word, whatever writers do meanwhile.
type slot[V any] struct {
	v V
	h atomic.Uint64 // the key's hash, never 0; 0 marks an empty slot
	// last is, for a Map, when the key was last used (clock nanos); for
	// Buckets it is the key's bucket word (internal/gcra: the time the
	// bucket was empty, which says as much, in units since the index's
	// base). Retired once the slot is no longer the key's.
	last atomic.Int64
}

// index is a shard's slot array with what its words are relative to. It is
// replaced, never resized in place: a rebuild (growth, shrinking, dropping
// tombstones, moving the base) retires every word of the old index with an
// atomic swap and copies the value it swapped out, so an update made on the
// old index either lands before the swap (and is copied) or fails on the
// retired word (and is made again on the new index). None is lost.
type index[V any] struct {
	slots []slot[V] // length a power of two, or 0
	mask  uint64
	// base is, for Buckets, the clock nanos that unit 0 of the words
	// stands for.
	base int64
}

// find returns the slot of the live key with hash h in x, or -1. It takes
// no lock: a key being added or moved may be missed (the caller then looks
// again under the lock), a key found is the right one.
func (x *index[V]) find(h uint64) int32 {
	if len(x.slots) == 0 {
		return -1
	}
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch x.slots[i].h.Load() {
		case h:
			if x.slots[i].last.Load() != retired {
				return int32(i)
			}
			// A tombstone of the key: it may have come back further on.
		case 0:
			return -1
		}
	}
}

// place fills the first empty slot on h's probe path. The caller holds the
// shard's lock, and x keeps an empty slot besides.
func (x *index[V]) place(h uint64, v V, w int64) int32 {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		if e := &x.slots[i]; e.h.Load() == 0 {
			e.v = v
			e.last.Store(w)
			e.h.Store(h) // publishes v and w to readers that match h
			return int32(i)
		}
	}
}

// shard is one lock's worth of keys: a linear-probing hash table, its live
// keys and tombstones together at most 3/4 of its slots (at least 1/8 live
// for a table above minSlots). A Map hashes each key to one of its shards.
//
// Lookups take no lock and write nothing shared: they load the index and
// probe it, and a Buckets admission then writes only its key's word. The
// lock serializes the writers (insertion plus a bounded sweep, a rebuild);
// a rebuild holds it for at most MaxKeys/shards keys.
type shard[V any] struct {
	ix atomic.Pointer[index[V]]
	_  [56]byte // readers load ix; keep the writers' fields off its line

	mu   sync.Mutex
	n    int32 // live keys
	dead int32 // tombstones
	hand int32 // the sweep's position

	created    atomic.Uint64
	evicted    atomic.Uint64
	overflowed atomic.Uint64

	_ [64]byte // keep the next shard's ix off this line
}

// load returns the current index.
func (s *shard[V]) load() *index[V] { return s.ix.Load() }

// add stores the key with hash h, which is not in s, and returns its slot.
// The caller holds the lock and has reserved room under the table's cap.
func (s *shard[V]) add(h uint64, v V, w int64) int32 {
	x := s.load()
	if 4*(int(s.n+s.dead)+1) > 3*len(x.slots) {
		n := max(minSlots, len(x.slots))
		if 8*(int(s.n)+1) > 3*n { // dropping the tombstones is not enough
			n *= 2
		}
		x = s.rebuild(n, x.base, nil)
	}
	s.n++
	s.created.Add(1)
	return x.place(h, v, w)
}

// rebuild replaces s's index by one of n slots relative to base, holding
// s's live keys (each word passed through move, if not nil), and returns
// it. The caller holds the lock. Keys change slots, so the sweep starts
// over (a permit's refund finds its key by hash, see Buckets.give).
func (s *shard[V]) rebuild(n int, base int64, move func(int64) int64) *index[V] {
	old := s.load()
	x := &index[V]{slots: make([]slot[V], n), mask: uint64(n - 1), base: base}
	for i := range old.slots {
		e := &old.slots[i]
		h := e.h.Load()
		if h == 0 {
			continue
		}
		w := e.last.Swap(retired) // from now on, every CAS on e fails
		if w == retired {
			continue // a tombstone
		}
		if move != nil {
			w = move(w)
		}
		x.place(h, e.v, w)
	}
	s.dead = 0
	s.hand = 0
	s.ix.Store(x)
	return x
}

// retire counts the key whose word the caller just retired as evicted,
// shrinking the index if few keys are left. The caller holds the lock.
func (s *shard[V]) retire() {
	s.n--
	s.dead++
	s.evicted.Add(1)
	if x := s.load(); len(x.slots) > minSlots && 8*int(s.n) < len(x.slots) {
		s.rebuild(len(x.slots)/2, x.base, nil)
	}
}

// sweep looks at up to budget slots from the hand and evicts the keys that
// are stale at now and not busy (busy may be nil). It reports how many it
// evicted. The caller holds the lock.
func (s *shard[V]) sweep(now int64, budget int, stale func(last, now int64) bool, busy func(V) bool) int {
	evicted := 0
	for ; budget > 0 && s.n > 0; budget-- {
		x := s.load() // an eviction may have shrunk it
		if int(s.hand) >= len(x.slots) {
			s.hand = 0
		}
		e := &x.slots[s.hand]
		s.hand++
		if e.h.Load() == 0 {
			continue
		}
		w := e.last.Load()
		if w == retired || !stale(w, now) || !e.last.CompareAndSwap(w, retired) {
			continue // a reader that updated the word meanwhile keeps the key
		}
		// Retired first, busy second: a Map caller that acquired from
		// e.v before this look is seen busy, and one that acquires after
		// it sees the word retired (see Map.Acquire), so no permit of an
		// evicted limiter is kept. Undone if busy; readers that saw the
		// word retired meanwhile look again under the lock, held here.
		if busy != nil && busy(e.v) {
			e.last.Store(w)
			continue
		}
		s.retire()
		evicted++
	}
	return evicted
}
