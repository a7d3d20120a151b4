package keyed

import (
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/counter"
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

// slot is one key in a shard's open-addressing table. A key is known by its
// 64-bit hash under the table's secret seed (see table.hash), not by its
// bytes: the hash, the last-use time and the value sit together, so that a
// lookup touches one cache line, and a Buckets admission updates the word
// next to the hash it just matched.
type slot[V any] struct {
	v V
	h uint64 // the key's hash, never 0; 0 marks an empty slot
	// last is when the key was last used, in clock nanos; for Buckets it
	// is the key's bucket word (internal/gcra: the time the bucket was
	// empty, which says as much, in units since the shard's base). Written
	// atomically under the read lock, read under the write lock.
	last int64
}

// shard is one lock's worth of keys: a linear-probing hash table, kept
// between 3/8 and 3/4 full (1/8 for a shrinking one). A Map hashes each key
// to one of its shards; the lock is held for a lookup, or for an insertion
// plus a bounded sweep, never for a pass over every key (except to resize
// one shard, which holds at most MaxKeys/shards keys).
type shard[V any] struct {
	mu    sync.RWMutex
	slots []slot[V] // length a power of two, or 0
	mask  uint64
	n     int32 // live keys
	hand  int32 // the sweep's position
	// base is, for Buckets, the clock nanos that unit 0 of the slots'
	// words stands for. It moves (rewriting every word, exactly) only under
	// the write lock, when a time is too far from it to convert.
	base int64

	// Per-shard counters, so that parallel admissions on different keys do
	// not fight over one cache line; Stats sums them.
	counters   counter.Fixed
	created    atomic.Uint64
	evicted    atomic.Uint64
	overflowed atomic.Uint64

	_ [64]byte // keep neighbouring shards' locks off this cache line
}

// find returns the slot of the key with hash h, or -1. The caller holds
// either lock.
func (s *shard[V]) find(h uint64) int32 {
	if s.n == 0 {
		return -1
	}
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		switch s.slots[i].h {
		case h:
			return int32(i)
		case 0:
			return -1
		}
	}
}

func (s *shard[V]) at(i int32) *slot[V] { return &s.slots[i] }

// add stores the key with hash h, which is not in s, and returns its slot.
// The caller holds the write lock and has reserved room under the table's
// cap.
func (s *shard[V]) add(h uint64, v V, now int64) int32 {
	if 4*(int(s.n)+1) > 3*len(s.slots) {
		s.resize(max(minSlots, 2*len(s.slots)))
	}
	s.n++
	s.created.Add(1)
	return s.place(slot[V]{v: v, h: h, last: now})
}

func (s *shard[V]) place(e slot[V]) int32 {
	for i := e.h & s.mask; ; i = (i + 1) & s.mask {
		if s.slots[i].h == 0 {
			s.slots[i] = e
			return int32(i)
		}
	}
}

// resize rehashes s into n slots. It moves keys to new slots, so the sweep
// starts over, and a permit's refund that finds its slot taken by another
// key is dropped (see Buckets.give).
func (s *shard[V]) resize(n int) {
	old := s.slots
	s.slots = make([]slot[V], n)
	s.mask = uint64(n - 1)
	s.hand = 0
	for i := range old {
		if old[i].h != 0 {
			s.place(old[i])
		}
	}
}

// remove deletes slot i, shifting the keys after it back so that every key
// stays reachable from its home slot (no tombstones: lookups stay short
// however many keys came and went). The caller holds the write lock.
func (s *shard[V]) remove(i int32) {
	hole := uint64(i)
	for j := (hole + 1) & s.mask; s.slots[j].h != 0; j = (j + 1) & s.mask {
		home := s.slots[j].h & s.mask
		// The key at j may fill the hole unless its home lies
		// cyclically in (hole, j]: then it would sit before its home.
		var stays bool
		if hole <= j {
			stays = hole < home && home <= j
		} else {
			stays = hole < home || home <= j
		}
		if !stays {
			s.slots[hole] = s.slots[j]
			hole = j
		}
	}
	s.slots[hole] = slot[V]{} // drop the references for the GC
	s.n--
	if len(s.slots) > minSlots && 8*int(s.n) < len(s.slots) {
		s.resize(len(s.slots) / 2)
	}
}

// sweep looks at up to budget slots from the hand and evicts the keys that
// are stale at now and not busy (busy may be nil). It reports how many it
// evicted. The caller holds the write lock.
func (s *shard[V]) sweep(now int64, budget int, stale func(last, now int64) bool, busy func(V) bool) int {
	evicted := 0
	for ; budget > 0 && s.n > 0; budget-- {
		if int(s.hand) >= len(s.slots) {
			s.hand = 0
		}
		e := &s.slots[s.hand]
		if e.h != 0 && stale(e.last, now) && (busy == nil || !busy(e.v)) {
			s.remove(s.hand)
			evicted++
			continue // a key may have shifted into this slot: look again
		}
		s.hand++
	}
	if evicted > 0 {
		s.evicted.Add(uint64(evicted))
	}
	return evicted
}
