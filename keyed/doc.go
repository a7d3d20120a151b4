// Package keyed gives every key (a client IP, an API key, a tenant) its own
// limiter, with a hard cap on live keys so that a flood of distinct keys
// cannot grow memory without bound.
//
// Two types, one machinery:
//
//   - Buckets is a token bucket per key, all with the same rate and burst.
//     Use it for per-client rate limits: a key costs about 80 bytes and
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
// spread over up to 64 shards, each with its own lock; each insertion looks
// at a few keys of its shard (at most 68) from where the last look stopped,
// so the lock is held for a bounded time whatever the number of keys, and
// idle keys are reclaimed as fast as new keys arrive. Lookups of live keys
// take only a shard's read lock.
//
// Memory per live key, measured with runtime.MemStats over 100,000 keys like
// "10.1.134.160" (BenchmarkBytesPerKey here, BenchmarkKeyedBytesPerKey in
// the bench module, Go 1.26, amd64):
//
//	Buckets                 ~80 B  (slot 24 B, index map ~40 B, the key's copy 16 B)
//	Map[*rate.Bucket]      ~364 B  (the above plus a rate.Bucket and its state)
//	sethvargo memorystore   ~99 B  (for comparison: no cap on keys)
//
// So 100,000 live keys take about 8 MB with Buckets. Keys longer than
// MaxKeyLen (64 bytes) are kept as a 17-byte secret-seeded digest, so the
// bytes per key have a bound whatever clients send, and MaxKeys times that
// bound is the bound of the whole. Go maps do not shrink: after a flood the
// index keeps the size it reached, which the cap bounds.
//
// # Choosing IdleTimeout
//
// For a Map of token buckets, use at least Burst/Rate: a key evicted before
// its bucket refilled comes back full, which is a free burst. For a Map of
// concurrency limiters any value works (busy keys are never evicted). A short
// IdleTimeout frees room sooner during a flood of keys; a long one saves
// re-inserting clients that come back. The default is one minute.
package keyed
