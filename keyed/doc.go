// Package keyed gives every key (a client IP, an API key, a tenant) its own
// limiter, with a hard cap on live keys so that a flood of distinct keys
// cannot grow memory without bound.
//
// Two types, one machinery:
//
//   - Buckets is a token bucket per key, all with the same rate and burst.
//     Use it for per-client rate limits: a key costs about 37 bytes and
//     Allow does not allocate.
//   - Map[L] holds any sluice.Limiter per key, made by Config.New: a
//     concurrency limit per tenant, a rate.Bucket per key with its own
//     settings, a sluice.All of several.
//
// Both offer Acquire(ctx, key) and TryAcquire(key) with the sluice.Limiter
// semantics, For(key) to get one key as a sluice.Limiter (for sluice.All),
// and Stats: live keys, keys created and evicted, new keys overflowed, and
// admissions and rejections over all keys.
//
// # Bounded memory
//
// At most MaxKeys keys are live. When a new key arrives and the cap is
// reached, a key that has gone unused for IdleTimeout is evicted to make room
// (for Buckets: a key whose bucket has been full for IdleTimeout, which loses
// nothing since a new key starts full; for a Map: a key whose limiter also
// reports nothing in flight or queued). If none is found, the new key is not
// stored: it is served by the shared overflow limiter, and Stats.Overflowed
// counts it. Live keys are never evicted to make room, so a client rotating
// through fresh keys can neither push legitimate clients out nor get a fresh
// burst per key: past the cap, all its keys share one limiter. The price is
// that a genuinely new client arriving during such a flood shares the
// overflow limiter too, until idle keys free room.
//
// Eviction is lazy: no goroutine, no timer, no pass over every key. Keys are
// spread over shards (64 for most sizes), each with its own lock; each
// insertion looks
// at a few keys of its shard (at most 68) from where the last look stopped,
// so the lock is held for a bounded time whatever the number of keys, and
// idle keys are reclaimed as fast as new keys arrive. Lookups of live keys
// take only a shard's read lock. A shard is an open-addressing table that
// grows and shrinks by rehashing under its lock; there are enough shards
// that one holds at most 4,096 keys for MaxKeys up to 4 million.
//
// A key is kept as its 64-bit hash under a secret per-table seed, not as its
// bytes: a key costs the same whatever its length (a header value may be a
// megabyte), a lookup compares one word and touches one cache line, and an
// insertion allocates nothing for the key. Two keys share a limiter only if
// their hashes collide, with probability about n²/2^65 among n live keys (one
// in eight billion for 65,536), which a client cannot aim for without the
// seed.
//
// Memory per live key, measured with runtime.MemStats over 100,000 keys like
// "10.1.134.160" (BenchmarkBytesPerKey here, BenchmarkKeyedBytesPerKey in
// the bench module, Go 1.26, amd64):
//
//	Buckets                 ~37 B  (a 16-byte slot, the table 3/8 to 3/4 full)
//	Map[*rate.Bucket]      ~375 B  (a 24-byte slot, plus the rate.Bucket)
//	sethvargo memorystore   ~99 B  (for comparison: no cap on keys)
//
// So 100,000 live keys take about 4 MB with Buckets, and MaxKeys times the
// bytes per key bounds the whole. Tables shrink as keys are evicted.
//
// # Choosing IdleTimeout
//
// For a Map of token buckets, use at least Burst/Rate: a key evicted before
// its bucket refilled comes back full, which is a free burst. For a Map of
// concurrency limiters any value works (busy keys are never evicted). A short
// IdleTimeout frees room sooner during a flood of keys; a long one saves
// re-inserting clients that come back. The default is one minute.
package keyed
