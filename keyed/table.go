package keyed

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/counter"
)

// table is the key machinery Map and Buckets share: shards, the cap, the
// sweep policy and the counters.
type table[V any] struct {
	seed    maphash.Seed
	shift   uint // 64 - log2(len(shards))
	shards  []shard[V]
	live    atomic.Int64
	maxKeys int64
	idle    int64        // Map: nanos without use before a key may be evicted
	busy    func(V) bool // nil: no key is ever busy
	// stale reports whether a key whose slot holds last may be evicted at
	// now: for a Map, idle for idle nanos; Buckets sets its own (a bucket
	// full for IdleTimeout, see Buckets.stale).
	stale func(last, now int64) bool

	// Admissions and rejections over all keys. One set for the table,
	// spreading into per-goroutine stripes under contention, so that a
	// count writes a line no other core writes (per-shard counters were
	// lines that every core wrote in turn, a cache miss on most counts).
	counters counter.Counters
}

// init makes the shards, each with an empty index whose words are relative
// to base (Buckets: clock nanos; a Map keeps times, base 0).
func (t *table[V]) init(maxKeys int, idle int64, busy func(V) bool, base int64) {
	n := shardCount(maxKeys)
	t.seed = maphash.MakeSeed()
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	t.shards = make([]shard[V], n)
	for i := range t.shards {
		t.shards[i].ix.Store(&index[V]{base: base})
	}
	t.maxKeys = int64(maxKeys)
	t.idle = idle
	t.busy = busy
	t.stale = func(last, now int64) bool { return now-last >= idle }
}

// shardCount picks a power of two giving each shard room for at least 64
// keys, and at least 64 shards when that allows: enough to keep parallel
// lookups on different locks, few enough that a small Map stays small. Past
// 64 shards, more shards keep each at most 4,096 keys (up to 1,024 shards),
// because growing a shard rehashes it under its lock.
func shardCount(maxKeys int) int {
	n := 1
	for n < 64 && maxKeys/(2*n) >= 64 {
		n *= 2
	}
	for n < 1024 && maxKeys/n > 4096 {
		n *= 2
	}
	return n
}

// hash is the identity of key in the table: keys are kept as their 64-bit
// hash under a secret per-table seed, not as their bytes. So a key costs the
// same few bytes however long it is (a header value may be a megabyte), a
// lookup compares one word instead of chasing the key's bytes, and an
// insertion allocates nothing for the key. Two keys share a limiter only if
// their hashes collide: among n live keys that happens with probability
// about n²/2^65 (one in eight billion for 65,536 keys), and a client cannot
// aim for it without the seed.
func (t *table[V]) hash(key string) uint64 {
	if h := maphash.String(t.seed, key); h != 0 {
		return h
	}
	return 1 // 0 marks an empty slot
}

// shardOf picks the shard from the hash's top bits. A Buckets permit carries
// the whole hash (see where), so it finds its shard and its key again.
func (t *table[V]) shardOf(h uint64) *shard[V] {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[h>>t.shift]
}

// reserve sweeps s for idle keys and then takes room for one more key under
// maxKeys, if there is any. The caller holds s's lock.
//
// The cap is one atomic count over all shards rather than a share per
// shard: hashed keys never spread evenly, and per-shard shares would start
// overflowing some shards well before MaxKeys keys are live. A full table
// sweeps only the shard at hand; the other shards' idle keys are reclaimed
// by the insertions that land there.
func (t *table[V]) reserve(s *shard[V], now int64) bool {
	evicted := s.sweep(now, sweepStep, t.stale, t.busy)
	if t.live.Load()-int64(evicted) >= t.maxKeys {
		evicted += s.sweep(now, fullSweepStep, t.stale, t.busy)
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

// count adds an admission or a rejection to the counters; a cancelled wait
// (or any error that is not a rejection) is neither.
func (t *table[V]) count(err error) {
	switch {
	case err == nil:
		t.counters.Admit()
	case sluice.ReasonOf(err) != sluice.ReasonUnknown:
		t.counters.Reject(sluice.ReasonOf(err))
	}
}

// stats sums the shards' counters without taking any lock.
func (t *table[V]) stats() Stats {
	st := Stats{Keys: int(t.live.Load()), MaxKeys: int(t.maxKeys)}
	t.counters.Fill(&st.Stats)
	for i := range t.shards {
		s := &t.shards[i]
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
