package redisstore

import (
	"math"
	"sync"
)

// overLimit remembers keys known to be over their limit until the time one
// token comes back (the script's retry1), so that a rejected flood is
// answered in the process instead of in Redis (Envoy's ratelimit does the
// same with freecache). It can only be too strict when a token came back
// early: a refund (Permit.Cancel) or a flushed Redis; both are rare, and
// the entry lasts no longer than the retry-after Redis gave.
//
// It holds at most max keys (keys are client input; the cap bounds the
// memory). When full, an insert looks at evictSample entries only and
// drops the expired ones among them, or else the one that expires first:
// O(1) under the lock whatever max, so a flood of distinct over-limit keys
// does not make every rejection scan the map. An evicted key costs a
// round trip at its next request, as without the cache.
type overLimit struct {
	mu  sync.Mutex
	max int
	m   map[string]int64 // key → store-clock nanos until which it is over
}

func newOverLimit(max int) *overLimit {
	if max <= 0 {
		return nil
	}
	return &overLimit{max: max, m: make(map[string]int64)}
}

// until returns when key stops being over its limit, 0 if not known over.
func (c *overLimit) until(key string, now int64) int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	u, ok := c.m[key]
	if ok && u <= now {
		delete(c.m, key)
		u = 0
	}
	c.mu.Unlock()
	return u
}

func (c *overLimit) put(key string, until, now int64) {
	if c == nil || until <= now {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		first, firstU, seen := "", int64(math.MaxInt64), 0
		for k, u := range c.m { // map order is random: a random sample
			if u <= now {
				delete(c.m, k)
			} else if u < firstU {
				first, firstU = k, u
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if len(c.m) >= c.max {
			delete(c.m, first)
		}
	}
	c.m[key] = until
}

// evictSample is how many entries a full map's insert looks at: like
// Redis's maxmemory sampling, a few random entries approximate the oldest
// well enough, in constant time.
const evictSample = 8

// reservoirs hold the tokens the batched mode took from Redis and not yet
// spent, per key, each until its expiry: tokens are spent locally only
// within Hold of being taken, which bounds the overshoot (see
// RateConfig.Batch). At most max keys; past it a key takes no more than it
// needs (no batching), so memory stays bounded. A full map's insert drops
// the expired entries among evictSample it looks at (O(1), as overLimit)
// but never a live one: that would waste tokens taken from Redis.
type reservoirs struct {
	mu  sync.Mutex
	max int
	m   map[string]reservoir
}

type reservoir struct {
	tokens  int64
	expires int64
}

func newReservoirs(max int) *reservoirs { return &reservoirs{max: max, m: make(map[string]reservoir)} }

// take spends n local tokens of key if it holds them, and returns when
// they would have expired (0 when it does not hold them).
func (r *reservoirs) take(key string, n, now int64) (expires int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	if !ok {
		return 0
	}
	if v.expires <= now {
		delete(r.m, key)
		return 0
	}
	if v.tokens < n {
		return 0
	}
	v.tokens -= n
	if v.tokens == 0 {
		delete(r.m, key)
	} else {
		r.m[key] = v
	}
	return v.expires
}

// add keeps n tokens for key until expires, at most limit held. Added to
// tokens still held, all of them keep the earlier expiry: no token is
// spent later than Batch/Rate after Redis granted it (RateConfig.Batch),
// at the cost of a few fresh tokens wasted, never spent beyond the rate.
// (Each addition used to push the expiry of every token held to its own,
// so tokens given back by Cancel now and then lived on indefinitely.) It
// returns false when the key could not be kept (the map is full).
func (r *reservoirs) add(key string, n, limit, expires, now int64) bool {
	if n <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	if !ok && len(r.m) >= r.max {
		seen := 0
		for k, x := range r.m {
			if x.expires <= now {
				delete(r.m, k)
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if len(r.m) >= r.max {
			return false
		}
	}
	if !ok || v.expires <= now {
		v = reservoir{expires: expires}
	}
	v.tokens = min(v.tokens+n, limit)
	v.expires = min(v.expires, expires)
	r.m[key] = v
	return true
}
