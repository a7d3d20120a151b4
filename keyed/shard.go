package keyed

import (
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/counter"
)

// How much of a shard one insertion sweeps. Every insertion looks at
// sweepStep slots for idle keys, so that reclaiming idle keys keeps pace with
// new ones; an insertion into a full Map looks at up to fullSweepStep of its
// shard before it gives up and overflows. Both bound the time the shard's lock is
// held, whatever the number of keys: there is no sweep over the whole map.
const (
	sweepStep     = 4
	fullSweepStep = 64
)

// maxChunk is the number of slots allocated at a time. Slots live in
// fixed-size chunks so that growing a shard never moves them (readers update
// a slot's last-use time under the read lock) and so that a shard's memory
// grows with its keys, not with its cap.
const maxChunk = 256

// slot is one live key. Slots 0..n-1 of a shard are live; removing one moves
// the last slot into its place, so the sweep's hand walks a dense array.
type slot[V any] struct {
	v   V
	key string // shares its bytes with the index map's key
	// last is when the key was last used, in clock nanos (for Buckets:
	// the time its bucket was empty, which says as much). Written
	// atomically under the read lock, read under the write lock.
	last int64
}

// shard is one lock's worth of keys. A Map hashes each key to one of its
// shards; the lock is held for a map lookup, or for an insertion plus a
// bounded sweep, never for a pass over every key.
type shard[V any] struct {
	mu     sync.RWMutex
	index  map[string]int32 // key -> slot number
	chunks [][]slot[V]
	chunk  int32 // slots per chunk
	n      int32 // live slots
	hand   int32 // the sweep's position

	// Per-shard counters, so that parallel admissions on different keys do
	// not fight over one cache line; Stats sums them.
	counters   counter.Counters
	created    atomic.Uint64
	evicted    atomic.Uint64
	overflowed atomic.Uint64

	_ [64]byte // keep neighbouring shards' locks off this cache line
}

func (s *shard[V]) init(chunk int) {
	s.chunk = int32(max(1, min(chunk, maxChunk)))
	s.index = make(map[string]int32)
}

func (s *shard[V]) at(i int32) *slot[V] { return &s.chunks[i/s.chunk][i%s.chunk] }

// add appends a slot for key. The caller holds the write lock and has
// reserved room under the Map's cap.
func (s *shard[V]) add(key string, v V, now int64) {
	i := s.n
	if int(i/s.chunk) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]slot[V], s.chunk))
	}
	*s.at(i) = slot[V]{v: v, key: key, last: now}
	s.index[key] = i
	s.n++
	s.created.Add(1)
}

// remove deletes slot i by moving the last slot into its place. The caller
// holds the write lock.
func (s *shard[V]) remove(i int32) {
	delete(s.index, s.at(i).key)
	last := s.n - 1
	if i != last {
		*s.at(i) = *s.at(last)
		s.index[s.at(i).key] = i
	}
	*s.at(last) = slot[V]{} // drop the references for the GC
	s.n--
	// Give back a trailing chunk once the one before it is half empty too:
	// the hysteresis stops a shard that hovers at a chunk boundary from
	// allocating and freeing a chunk on every insertion.
	if k := len(s.chunks); k > 1 && s.n < int32(k-2)*s.chunk+s.chunk/2 {
		s.chunks[k-1] = nil
		s.chunks = s.chunks[:k-1]
	}
}

// sweep looks at up to budget slots from the hand and evicts those idle since
// before now-idle and not busy (busy may be nil). It reports how many it
// evicted. The caller holds the write lock.
func (s *shard[V]) sweep(now, idle int64, budget int, busy func(V) bool) int {
	evicted := 0
	for ; budget > 0 && s.n > 0; budget-- {
		if s.hand >= s.n {
			s.hand = 0
		}
		e := s.at(s.hand)
		if now-e.last >= idle && (busy == nil || !busy(e.v)) {
			s.remove(s.hand)
			evicted++
			continue // the hand now points at the slot moved into this place
		}
		s.hand++
	}
	if evicted > 0 {
		s.evicted.Add(uint64(evicted))
	}
	return evicted
}
