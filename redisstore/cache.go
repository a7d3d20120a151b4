package redisstore

import "sync"

// overLimit remembers keys known to be over their limit until the time one
// token comes back (the script's retry1), so that a rejected flood is
// answered in the process instead of in Redis (Envoy's ratelimit does the
// same with freecache). It can only be too strict when a token came back
// early: a refund (Permit.Cancel) or a flushed Redis; both are rare, and
// the entry lasts no longer than the retry-after Redis gave.
//
// It holds at most max keys: when full, expired entries are dropped, and
// if none is, the new key is not cached (it then costs a round trip, as
// without the cache). Keys are client input; the cap bounds the memory.
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
		for k, u := range c.m {
			if u <= now {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			return
		}
	}
	c.m[key] = until
}

// reservoirs hold the tokens the batched mode took from Redis and not yet
// spent, per key, each until its expiry: tokens are spent locally only
// within Hold of being taken, which bounds the overshoot (see
// RateConfig.Batch). At most max keys; past it a key takes no more than it
// needs (no batching), so memory stays bounded.
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

// take spends n local tokens of key if it holds them.
func (r *reservoirs) take(key string, n, now int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	if !ok {
		return false
	}
	if v.expires <= now {
		delete(r.m, key)
		return false
	}
	if v.tokens < n {
		return false
	}
	v.tokens -= n
	if v.tokens == 0 {
		delete(r.m, key)
	} else {
		r.m[key] = v
	}
	return true
}

// add keeps n tokens for key until expires, at most limit held. It
// returns false when the key could not be kept (the map is full).
func (r *reservoirs) add(key string, n, limit, expires, now int64) bool {
	if n <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	if !ok && len(r.m) >= r.max {
		for k, x := range r.m {
			if x.expires <= now {
				delete(r.m, k)
			}
		}
		if len(r.m) >= r.max {
			return false
		}
	}
	if !ok || v.expires <= now {
		v = reservoir{}
	}
	v.tokens = min(v.tokens+n, limit)
	v.expires = max(v.expires, expires)
	r.m[key] = v
	return true
}
