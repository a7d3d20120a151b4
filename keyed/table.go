package keyed

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// table is the key machinery Map and Buckets share: shards, the cap, the
// sweep policy and the counters.
type table[V any] struct {
	seed    maphash.Seed
	seed2   maphash.Seed // with seed, the digest of long keys
	shift   uint         // 64 - log2(len(shards))
	shards  []shard[V]
	live    atomic.Int64
	maxKeys int64
	idle    int64        // nanos without use before a key may be evicted
	busy    func(V) bool // nil: no key is ever busy
}

func (t *table[V]) init(maxKeys int, idle int64, busy func(V) bool) {
	n := shardCount(maxKeys)
	t.seed, t.seed2 = maphash.MakeSeed(), maphash.MakeSeed()
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	t.shards = make([]shard[V], n)
	t.maxKeys = int64(maxKeys)
	t.idle = idle
	t.busy = busy
	for i := range t.shards {
		t.shards[i].init(maxKeys / n)
	}
}

// shardCount picks a power of two giving each shard room for at least 64
// keys, at most 64 shards: enough to keep parallel lookups on different
// locks, few enough that a small Map stays small.
func shardCount(maxKeys int) int {
	n := 1
	for n < 64 && maxKeys/(2*n) >= 64 {
		n *= 2
	}
	return n
}

func (t *table[V]) hash(key string) uint64 { return maphash.String(t.seed, key) }

// MaxKeyLen is the longest key kept as it is. A longer key is kept as a
// 128-bit digest of it under secret per-table seeds, so that a live key costs
// a bounded number of bytes however long the keys a client sends (a header
// value may be a megabyte). Two long keys share a limiter only if their
// digests collide, which a client cannot arrange without the seeds.
const MaxKeyLen = 64

// stored returns the form in which the table keeps key. Long keys cost an
// allocation per lookup; keys up to MaxKeyLen cost nothing.
func (t *table[V]) stored(key string) string {
	if len(key) <= MaxKeyLen {
		return key
	}
	var d [17]byte
	d[0] = 0xff // not valid UTF-8: unlike the short keys of real clients
	binary.LittleEndian.PutUint64(d[1:], maphash.String(t.seed, key))
	binary.LittleEndian.PutUint64(d[9:], maphash.String(t.seed2, key))
	return string(d[:])
}

// shardOf picks the shard from the hash's top bits (Buckets uses the low
// bits to check refunds).
func (t *table[V]) shardOf(h uint64) *shard[V] {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[h>>t.shift]
}

// reserve sweeps s for idle keys and then takes room for one more key under
// maxKeys, if there is any. The caller holds s's write lock.
//
// The cap is one atomic count over all shards rather than a share per
// shard: hashed keys never spread evenly, and per-shard shares would start
// overflowing some shards well before MaxKeys keys are live. A full table
// sweeps only the shard at hand; the other shards' idle keys are reclaimed
// by the insertions that land there.
func (t *table[V]) reserve(s *shard[V], now int64) bool {
	evicted := s.sweep(now, t.idle, sweepStep, t.busy)
	if t.live.Load()-int64(evicted) >= t.maxKeys {
		evicted += s.sweep(now, t.idle, fullSweepStep, t.busy)
	}
	n := t.live.Add(-int64(evicted))
	for ; n < t.maxKeys; n = t.live.Load() {
		if t.live.CompareAndSwap(n, n+1) { // never above maxKeys, even for a moment
			return true
		}
	}
	s.overflowed.Add(1)
	return false
}

// count adds an admission or a rejection to s's counters; a cancelled wait
// (or any error that is not a rejection) is neither.
func count[V any](s *shard[V], err error) {
	switch {
	case err == nil:
		s.counters.Admit()
	case sluice.ReasonOf(err) != sluice.ReasonUnknown:
		s.counters.Reject(sluice.ReasonOf(err))
	}
}

// stats sums the shards' counters without taking any lock.
func (t *table[V]) stats() Stats {
	st := Stats{Keys: int(t.live.Load()), MaxKeys: int(t.maxKeys)}
	for i := range t.shards {
		s := &t.shards[i]
		var c sluice.Stats
		s.counters.Fill(&c)
		st.Admitted += c.Admitted
		for r, v := range c.Rejected {
			st.Rejected[r] += v
		}
		st.Created += s.created.Load()
		st.Evicted += s.evicted.Load()
		st.Overflowed += s.overflowed.Load()
	}
	return st
}

// Stats is a snapshot of a Map's or a Buckets' keys and counters.
type Stats struct {
	// Admitted and Rejected count Acquire and TryAcquire calls (and, for
	// Buckets, Allow), over all keys and the overflow; a cancelled wait is
	// not a rejection. Limit, InFlight and Queued are the table's own (see
	// each type's Stats).
	sluice.Stats
	// Keys is the number of live keys, at most MaxKeys.
	Keys int
	// MaxKeys is the configured cap.
	MaxKeys int
	// Created counts keys stored (for a Map: limiters made, the overflow
	// limiter aside).
	Created uint64
	// Evicted counts keys removed to make room after going idle.
	Evicted uint64
	// Overflowed counts lookups of new keys that did not fit and were
	// served by the overflow limiter. Steady growth means MaxKeys is too
	// small for the traffic, or someone is rotating keys.
	Overflowed uint64
}
