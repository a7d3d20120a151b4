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
//     settings (about 375 bytes a key), a sluice.All of several.
//
// Both offer Acquire(ctx, key) and TryAcquire(key) with the sluice.Limiter
// semantics, For(key) to get one key as a sluice.Limiter (for sluice.All),
// and Stats: live keys, keys created and evicted, new keys overflowed, and
// admissions and rejections over all keys.
//
// # Bounded memory
//
// At most MaxKeys keys (default 65,536) are live; MaxKeys times the bytes
// per key bounds the memory, and tables shrink as keys are evicted. When a
// new key arrives and the cap is reached, a key that has gone unused for
// IdleTimeout is evicted to make room (for Buckets: a key whose bucket has
// been full that long; for a Map: a key whose limiter also reports nothing
// in flight or queued). If none is found, the new key is not stored: it is
// served by the shared overflow limiter, and Stats.Overflowed counts it.
// Live keys are never evicted to make room, so a client rotating through
// fresh keys can neither push legitimate clients out nor get a fresh burst
// per key; a new client arriving during such a flood shares the overflow
// limiter too, until idle keys free room.
//
// Eviction is lazy: no goroutine, no timer; each insertion looks at a few
// keys of its shard, so a lock is held for a bounded time. A key is stored
// as its 64-bit hash under a secret seed, so a key costs the same whatever
// its length; two keys share a limiter only if their hashes collide (one in
// eight billion among 65,536 keys), which a client cannot aim for.
//
// # Choosing IdleTimeout
//
// The default is one minute. For a Map of token buckets, use at least
// Burst/Rate: a key evicted before its bucket refilled comes back full,
// which is a free burst. For a Map of concurrency limiters any value works
// (busy keys are never evicted).
//
// The shards, the hashing, the memory measurements and the trade-offs of
// IdleTimeout are in docs/design.md, section keyed.
package keyed
