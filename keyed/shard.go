package keyed

import (
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/counter"
)

// How much of a shard one insertion sweeps. Every insertion looks at
// sweepStep slots for idle keys, so that reclaiming idle keys keeps pace with
// new ones; an insertion into a full shard looks at up to fullSweepStep
// before it gives up and overflows. Both bound the time the shard's lock is
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
type slot[L sluice.Limiter] struct {
	key string // shares its bytes with the index map's key
	l   L
	// last is when the key was last used, in clock nanos. Written
	// atomically under the read lock (coarsely: see touch), read under
	// the write lock.
	last int64
}

// shard is one lock's worth of keys. A Map hashes each key to one of its
// shards; the lock is held for a map lookup, or for an insertion plus a
// bounded sweep, never for a pass over every key.
type shard[L sluice.Limiter] struct {
	mu     sync.RWMutex
	index  map[string]int32 // key -> slot number
	chunks [][]slot[L]
	chunk  int32 // slots per chunk
	n      int32 // live slots
	hand   int32 // the sweep's position
	cap    int32 // this shard's share of MaxKeys

	// Per-shard counters, so that parallel admissions on different keys do
	// not fight over one cache line; Stats sums them.
	counters   counter.Counters
	created    atomic.Uint64
	evicted    atomic.Uint64
	overflowed atomic.Uint64

	_ [64]byte // keep neighbouring shards' locks off this cache line
}

func (s *shard[L]) init(capacity int) {
	s.cap = int32(capacity)
	s.chunk = int32(min(capacity, maxChunk))
	s.index = make(map[string]int32)
}

func (s *shard[L]) at(i int32) *slot[L] { return &s.chunks[i/s.chunk][i%s.chunk] }

// touch records a use at now. It writes only when the recorded time is more
// than gran old, so that a hot key does not turn every read into a write
// bouncing the slot's cache line between cores. Callers hold the read lock.
func touch(p *int64, now, gran int64) {
	if now-atomic.LoadInt64(p) > gran {
		atomic.StoreInt64(p, now)
	}
}

// add appends a slot for key. The caller holds the write lock and has made
// sure the shard has room.
func (s *shard[L]) add(key string, l L, now int64) {
	i := s.n
	if int(i/s.chunk) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]slot[L], s.chunk))
	}
	*s.at(i) = slot[L]{key: key, l: l, last: now}
	s.index[key] = i
	s.n++
	s.created.Add(1)
}

// remove deletes slot i by moving the last slot into its place. The caller
// holds the write lock.
func (s *shard[L]) remove(i int32) {
	delete(s.index, s.at(i).key)
	last := s.n - 1
	if i != last {
		*s.at(i) = *s.at(last)
		s.index[s.at(i).key] = i
	}
	*s.at(last) = slot[L]{} // drop the references for the GC
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
// before now-idle. It reports how many it evicted. The caller holds the write
// lock.
func (s *shard[L]) sweep(now, idle int64, budget int) int {
	evicted := 0
	for ; budget > 0 && s.n > 0; budget-- {
		if s.hand >= s.n {
			s.hand = 0
		}
		e := s.at(s.hand)
		if now-e.last >= idle && !busy(e.l) {
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

// busy reports whether l holds permits or has callers waiting: such a key is
// never evicted however long ago it was last looked up, since a fresh limiter
// for it would admit on top of the work the old one still holds.
func busy[L sluice.Limiter](l L) bool {
	st := l.Stats()
	return st.InFlight > 0 || st.Queued > 0
}
