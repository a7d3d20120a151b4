package redisstore

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
)

// Concurrency is a concurrency limit shared by every replica: a lease per
// admitted request, in a Redis sorted set scored by expiry. One script
// acquires (drop expired, count, add if under the limit); a release
// removes the lease; one goroutine per limiter renews every held lease
// every TTL/3 in one round trip (its cost: one round trip per TTL/3 per
// replica plus O(held) work in Redis, whatever the number of leases),
// and a crashed holder's leases expire after TTL. A renewal adds back the
// leases Redis lost (a flush, a restart, a failover): until the holder's
// next renewal Redis admits beyond the limit by up to the leases it lost,
// at most TTL/3 once Redis answers and the store's breaker has closed.
//
// A waiting Acquire polls with jittered exponential backoff: each waiter
// costs one round trip per poll (at most one per PollMin, typically one per
// PollMax), which is simpler and cheaper in Redis than pub/sub at the
// waiter counts a limit of this kind has, at the price of admitting a
// waiter up to one poll interval after a slot frees.
//
// Close stops the renewal. Safe for concurrent use.
type Concurrency struct {
	leases
	set   string
	local localFor[*localConc]
}

// NewConcurrency returns a shared concurrency limit over s.
func NewConcurrency(s *Store, cfg ConcurrencyConfig) (*Concurrency, error) {
	if s == nil {
		return nil, sluice.NewConfigError("redisstore", "store", nil, "must not be nil")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	l := &Concurrency{set: "sluice:conc:{" + cfg.Key + "}"}
	l.start(s, cfg)
	return l, nil
}

// TryAcquire takes a lease now or rejects with ReasonLimit.
func (l *Concurrency) TryAcquire() (sluice.Permit, error) {
	return l.acquire(context.Background(), false, l.set, func(context.Context) (sluice.Permit, error) {
		return l.localLimiter().TryAcquire()
	})
}

// Acquire takes a lease, polling for a free slot up to MaxWait (rejected
// with ReasonQueueTimeout) or the context's end (ctx.Err()).
func (l *Concurrency) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return l.acquire(ctx, true, l.set, func(ctx context.Context) (sluice.Permit, error) {
		return l.localLimiter().Acquire(ctx)
	})
}

// localLimiter is FailLocal's limiter: ceil(Limit/N) in this process, N
// the replicas live now, counting the leases this replica holds.
func (l *Concurrency) localLimiter() *localConc {
	lim, _ := l.local.get(l.newLocal) // valid by construction: the shared config was checked
	l.fit(lim)
	l.adopt(l.set, lim)
	return lim
}

// localConc is a FailLocal limiter with the limit last set on it, so that
// fitting it to the replica count costs one atomic load while the count
// stays (its Stats would sum its striped counters).
type localConc struct {
	*concurrency.Limiter
	mu    sync.Mutex // orders SetLimit and the store of limit
	limit atomic.Int64
}

// newLocal makes a FailLocal limiter at the local limit for the replicas
// live now.
func (l *leases) newLocal() (*localConc, error) {
	n := l.localLimit(l.replicas())
	lim, err := concurrency.New(concurrency.Config{Limit: n, MaxQueue: l.cfg.Limit, MaxWait: l.cfg.MaxWait})
	if err != nil {
		return nil, err
	}
	c := &localConc{Limiter: lim}
	c.limit.Store(int64(n))
	return c, nil
}

// fit sets c to the local limit for the replicas live now. SetLimit keeps
// the permits held counted: after a shrink it admits no one until in
// flight is under the new limit.
func (l *leases) fit(c *localConc) {
	n := int64(l.localLimit(l.replicas()))
	if c.limit.Load() == n {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit.Load() != n {
		_ = c.SetLimit(int(n)) // 1 to Limit: valid
		c.limit.Store(n)
	}
}

// Stats returns the limiter's counters; InFlight is the leases Redis
// admitted that this replica holds (not FailLocal's permits), Limit the
// shared limit.
func (l *Concurrency) Stats() sluice.Stats { return l.stats() }

// KeyedConcurrency is a concurrency limit per key shared by every replica
// (Limit requests in flight per client, per tenant), as Concurrency does
// it for one: a sorted set per key, "sluice:conc:Key:{k}", so each key's
// set has its own Cluster slot. An idle key's set expires after TTL. Its
// cost in Redis: one small sorted set per key with leases held; in round
// trips: one per acquire and per release, and one per key with leases per
// renewal (every TTL/3). TryAcquire and Acquire make it an
// httplimit.Keyed (Config.PerKey); Key gives one key's limit as a
// sluice.Limiter.
//
// Close stops the renewal. Safe for concurrent use.
type KeyedConcurrency struct {
	leases
	prefix string
	local  localFor[*keyed.Map[*localConc]]
}

// NewKeyedConcurrency returns a shared concurrency limit per key over s.
func NewKeyedConcurrency(s *Store, cfg ConcurrencyConfig) (*KeyedConcurrency, error) {
	if s == nil {
		return nil, sluice.NewConfigError("redisstore", "store", nil, "must not be nil")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	l := &KeyedConcurrency{prefix: "sluice:conc:" + cfg.Key + ":"}
	l.start(s, cfg)
	return l, nil
}

func (l *KeyedConcurrency) set(key string) (string, error) {
	if len(l.prefix)+len(key)+2 > MaxKeyLen {
		return "", sluice.NewConfigError("redisstore", "key", len(key), "key length (with the prefix and braces) must be at most 1024 bytes (MaxKeyLen)")
	}
	return l.prefix + "{" + key + "}", nil
}

// TryAcquire takes a lease of key now or rejects with ReasonLimit.
func (l *KeyedConcurrency) TryAcquire(key string) (sluice.Permit, error) {
	set, err := l.set(key)
	if err != nil {
		return sluice.Permit{}, err
	}
	return l.acquire(context.Background(), false, set, func(context.Context) (sluice.Permit, error) {
		m, err := l.localMap(key, set)
		if err != nil {
			return sluice.Permit{}, err
		}
		return m.TryAcquire(key)
	})
}

// Acquire takes a lease of key, polling for a free slot up to MaxWait
// (rejected with ReasonQueueTimeout) or the context's end (ctx.Err()).
func (l *KeyedConcurrency) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	set, err := l.set(key)
	if err != nil {
		return sluice.Permit{}, err
	}
	return l.acquire(ctx, true, set, func(ctx context.Context) (sluice.Permit, error) {
		m, err := l.localMap(key, set)
		if err != nil {
			return sluice.Permit{}, err
		}
		return m.Acquire(ctx, key)
	})
}

// localMap is FailLocal's limiter: ceil(Limit/N) per key in this process,
// at most MaxKeys keys, with key's limiter (set its set) fitted to the
// replicas live now and counting the leases this replica holds for key.
// A key is fitted when it is used: until then, releases of its permits
// hand its freed slots to its waiters under the limit it had.
func (l *KeyedConcurrency) localMap(key, set string) (*keyed.Map[*localConc], error) {
	m, err := l.local.get(func() (*keyed.Map[*localConc], error) {
		return keyed.New(keyed.Config[*localConc]{
			New:     func(string) (*localConc, error) { return l.newLocal() },
			MaxKeys: l.cfg.MaxKeys,
		})
	})
	if err != nil {
		return nil, err
	}
	lim, err := m.Get(key) // the overflow limiter if key does not fit
	if err != nil {
		return nil, err
	}
	l.fit(lim)
	l.adopt(set, lim)
	return m, nil
}

// Key returns key's limit as a sluice.Limiter (its Stats are the whole
// KeyedConcurrency's).
func (l *KeyedConcurrency) Key(key string) *ConcurrencyKey {
	return &ConcurrencyKey{l: l, key: key}
}

// Stats returns the counters over every key; InFlight is the leases Redis
// admitted that this replica holds (not FailLocal's permits), Limit the
// limit of one key.
func (l *KeyedConcurrency) Stats() sluice.Stats { return l.stats() }

// ConcurrencyKey is one key's shared concurrency limit; see
// KeyedConcurrency.Key.
type ConcurrencyKey struct {
	l   *KeyedConcurrency
	key string
}

func (k *ConcurrencyKey) Acquire(ctx context.Context) (sluice.Permit, error) {
	return k.l.Acquire(ctx, k.key)
}
func (k *ConcurrencyKey) TryAcquire() (sluice.Permit, error) { return k.l.TryAcquire(k.key) }
func (k *ConcurrencyKey) Stats() sluice.Stats                { return k.l.Stats() }
