package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
)

// Defaults and bounds of ConcurrencyConfig.
const (
	DefaultLeaseTTL = 10 * time.Second
	DefaultPollMin  = time.Millisecond
	DefaultPollMax  = 20 * time.Millisecond
	MaxLimit        = 1000000
)

// The lease scripts keep one sorted set per limit: a member per lease,
// scored by its expiry in ms on Redis's clock. Every script first drops
// the expired members, so a crashed holder's leases stop counting once
// their TTL has passed, without any sweeper.
var (
	// KEYS[1] the set; ARGV limit, ttl ms, lease id.
	// Reply {acquired, held, ms until the earliest lease expires}.
	acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
  return {1, n + 1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = 0
if first[2] then wait = math.max(0, tonumber(first[2]) - now) end
return {0, n, wait}
`)
	// KEYS[1] the set; ARGV ttl ms, then lease ids. Renews the leases that
	// still exist; replies with the count of those that had expired.
	renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local lost = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  else
    lost = lost + 1
  end
end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return lost
`)
	// KEYS[1] the set; ARGV lease ids (one, or a batch of orphans).
	releaseScript = redis.NewScript(`return redis.call('ZREM', KEYS[1], unpack(ARGV))`)
)

// Orphans: at most maxOrphans remembered, removed at most orphanBatch per
// renewal in one ZREM. A batch stays far below Lua's unpack limit (~8000).
const (
	maxOrphans  = 10000
	orphanBatch = 1000
)

// ConcurrencyConfig configures a Concurrency limiter.
type ConcurrencyConfig struct {
	// Key names the shared limit; the set lives at
	// "sluice:conc:{Key}" (one Cluster slot). Required, at most 1,000 bytes.
	Key string
	// Limit is the most leases held at once by all replicas together:
	// 1 to MaxLimit. Required.
	Limit int
	// TTL is a lease's life without renewal: a crashed holder's slot comes
	// back after it. The limiter renews its leases every TTL/3. Default
	// DefaultLeaseTTL (10 s); 100 ms to 1 h.
	TTL time.Duration
	// MaxWait bounds how long Acquire waits for a slot; past it the caller
	// is rejected with ReasonQueueTimeout. 0: only the context bounds it.
	MaxWait time.Duration
	// PollMin and PollMax bound the wait between two tries of a waiting
	// Acquire: it starts at PollMin and doubles up to PollMax, each wait
	// drawn uniformly from [d/2, d] so that waiters spread out. Defaults
	// 1 ms and 20 ms; 100 µs to 1 s.
	PollMin, PollMax time.Duration
	// Failure is what a decision does when Redis cannot answer in time.
	// Default FailOpen.
	Failure Failure
	// Replicas is the N of FailLocal's ceil(Limit/N). 0: the store's
	// heartbeat count.
	Replicas int
}

// Concurrency is a concurrency limit shared by every replica: a lease per
// admitted request, in a Redis sorted set scored by expiry. One script
// acquires (drop expired, count, add if under the limit); a release
// removes the lease; one goroutine per limiter renews every held lease
// every TTL/3 in one round trip (its cost: one round trip per TTL/3 per
// replica plus O(held) work in Redis, whatever the number of leases),
// and a crashed holder's leases expire after TTL.
//
// A waiting Acquire polls with jittered exponential backoff: each waiter
// costs one round trip per poll (at most one per PollMin, typically one per
// PollMax), which is simpler and cheaper in Redis than pub/sub at the
// waiter counts a limit of this kind has, at the price of admitting a
// waiter up to one poll interval after a slot frees.
//
// Close stops the renewal. Safe for concurrent use.
type Concurrency struct {
	s     *Store
	cfg   ConcurrencyConfig
	key   string
	keys  []string
	ttlMs int64
	id    string // replica prefix of lease ids

	mu      sync.Mutex
	seq     uint64
	held    map[uint64]string // token → lease id
	orphans []string          // leases whose acquire timed out: maybe held, released by the renewer
	lost    uint64

	local localFor[*concurrency.Limiter]
	c     counters
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// NewConcurrency returns a shared concurrency limit over s.
func NewConcurrency(s *Store, cfg ConcurrencyConfig) (*Concurrency, error) {
	if s == nil {
		return nil, sluice.NewConfigError("redisstore", "store", nil, "must not be nil")
	}
	if cfg.Key == "" {
		return nil, sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", nil, "required")
	}
	if len(cfg.Key) > MaxKeyLen-24 {
		return nil, sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", len(cfg.Key), "key length must be at most 1000 bytes")
	}
	if cfg.Limit < 1 || cfg.Limit > MaxLimit {
		return nil, sluice.NewConfigError("redisstore", "ConcurrencyConfig.Limit", cfg.Limit, "must be between 1 and 1000000")
	}
	if err := durField("ConcurrencyConfig.TTL", &cfg.TTL, DefaultLeaseTTL, 100*time.Millisecond, time.Hour); err != nil {
		return nil, err
	}
	if cfg.MaxWait < 0 {
		return nil, sluice.NewConfigError("redisstore", "ConcurrencyConfig.MaxWait", cfg.MaxWait, "must be >= 0")
	}
	if err := durField("ConcurrencyConfig.PollMin", &cfg.PollMin, DefaultPollMin, 100*time.Microsecond, time.Second); err != nil {
		return nil, err
	}
	if err := durField("ConcurrencyConfig.PollMax", &cfg.PollMax, max(DefaultPollMax, cfg.PollMin), cfg.PollMin, time.Second); err != nil {
		return nil, err
	}
	if err := cfg.Failure.check(); err != nil {
		return nil, err
	}
	if cfg.Replicas < 0 || cfg.Replicas > 10000 {
		return nil, sluice.NewConfigError("redisstore", "ConcurrencyConfig.Replicas", cfg.Replicas, "must be between 0 and 10000")
	}
	key := "sluice:conc:{" + cfg.Key + "}"
	l := &Concurrency{
		s: s, cfg: cfg, key: key, keys: []string{key}, ttlMs: cfg.TTL.Milliseconds(),
		id: newID(), held: make(map[uint64]string),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	go l.renewer()
	return l, nil
}

// Close stops renewing the leases; those still held expire after TTL
// unless released. It does not close the store.
func (l *Concurrency) Close() {
	l.once.Do(func() { close(l.quit); <-l.done })
}

// TryAcquire takes a lease now or rejects with ReasonLimit.
func (l *Concurrency) TryAcquire() (sluice.Permit, error) {
	return l.acquire(context.Background(), false)
}

// Acquire takes a lease, polling for a free slot up to MaxWait (rejected
// with ReasonQueueTimeout) or the context's end (ctx.Err()).
func (l *Concurrency) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return l.acquire(ctx, true)
}

func (l *Concurrency) acquire(ctx context.Context, wait bool) (sluice.Permit, error) {
	var deadline <-chan time.Time
	if wait && l.cfg.MaxWait > 0 {
		t := time.NewTimer(l.cfg.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	poll := l.cfg.PollMin
	for {
		l.mu.Lock()
		l.seq++
		tok := l.seq
		l.mu.Unlock()
		id := l.id + ":" + strconv.FormatUint(tok, 36)
		v, err := l.s.eval(acquireScript, l.keys, l.cfg.Limit, l.ttlMs, id)
		if err != nil {
			if sentMaybe(err) {
				l.orphan(id)
			}
			return l.fail(ctx, wait, err)
		}
		var a [3]int64
		if err := parseInts(v, a[:]); err != nil {
			l.orphan(id) // Redis answered: the script ran
			return l.fail(ctx, wait, err)
		}
		if a[0] == 1 {
			l.mu.Lock()
			l.held[tok] = id
			l.mu.Unlock()
			l.c.admitted.Add(1)
			return sluice.NewPermit(l, tok), nil
		}
		if !wait {
			return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonLimit, 0))
		}
		d := poll/2 + rand.N(poll/2+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-deadline:
			t.Stop()
			return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonQueueTimeout, 0))
		case <-ctx.Done():
			t.Stop()
			return sluice.Permit{}, ctx.Err()
		}
		poll = min(2*poll, l.cfg.PollMax)
	}
}

// orphan remembers a lease that may be in Redis though no permit holds it
// (an acquire whose answer was lost, a release that failed), so that the
// renewer removes it when Redis answers again; at worst it holds a slot
// for TTL. Only calls that may have reached Redis make orphans: with the
// breaker open, failed acquires cost nothing here.
func (l *Concurrency) orphan(id string) {
	l.mu.Lock()
	if len(l.orphans) < maxOrphans {
		l.orphans = append(l.orphans, id)
	}
	l.mu.Unlock()
}

func (l *Concurrency) fail(ctx context.Context, wait bool, _ error) (sluice.Permit, error) {
	l.c.fallbacks.Add(1)
	switch l.cfg.Failure {
	case FailClosed:
		return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonStore, l.s.cfg.BreakerCooldown))
	case FailLocal:
		n := l.cfg.Replicas
		if n == 0 {
			n = l.s.Replicas()
		}
		lim, err := l.local.get(n, func(n int) (*concurrency.Limiter, error) {
			return concurrency.New(concurrency.Config{Limit: max(1, (l.cfg.Limit+n-1)/n), MaxQueue: l.cfg.Limit, MaxWait: l.cfg.MaxWait})
		})
		if err != nil {
			return sluice.Permit{}, err
		}
		var p sluice.Permit
		if wait {
			p, err = lim.Acquire(ctx)
		} else {
			p, err = lim.TryAcquire()
		}
		if err != nil {
			return sluice.Permit{}, l.c.reject(err)
		}
		l.c.admitted.Add(1)
		return p, nil
	}
	l.c.admitted.Add(1)
	return sluice.Permit{}, nil
}

// Release removes the lease (sluice.Releaser). If Redis does not answer,
// the lease expires after TTL.
func (l *Concurrency) Release(tok uint64, _ sluice.Outcome, _ time.Duration) { l.drop(tok) }

// Cancel is Release: a lease that never ran frees its slot the same way.
func (l *Concurrency) Cancel(tok uint64) { l.drop(tok) }

func (l *Concurrency) drop(tok uint64) {
	l.mu.Lock()
	id, ok := l.held[tok]
	delete(l.held, tok)
	l.mu.Unlock()
	if ok {
		// Whether or not the call reached Redis, the lease may still be
		// there: orphan it on any failure (at most one per lease held).
		if _, err := l.s.eval(releaseScript, l.keys, id); err != nil {
			l.orphan(id)
		}
	}
}

// renewer renews every held lease each TTL/3 in one round trip, and
// removes orphaned ones.
func (l *Concurrency) renewer() {
	defer close(l.done)
	tick := time.NewTicker(l.cfg.TTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-l.quit:
			return
		}
		l.renewOnce()
	}
}

// renewOnce renews the held leases, then removes up to orphanBatch
// orphans in one ZREM: at most two round trips, so a backlog of orphans
// never delays the next renewal. The newest orphans go first: the oldest
// are the likeliest to have expired by themselves.
func (l *Concurrency) renewOnce() {
	l.mu.Lock()
	args := make([]any, 0, 1+len(l.held))
	args = append(args, l.ttlMs)
	for _, id := range l.held {
		args = append(args, id)
	}
	n := min(len(l.orphans), orphanBatch)
	rm := make([]any, n)
	for i, id := range l.orphans[len(l.orphans)-n:] {
		rm[i] = id
	}
	l.orphans = l.orphans[:len(l.orphans)-n]
	l.mu.Unlock()
	if len(args) > 1 {
		if v, err := l.s.eval(renewScript, l.keys, args...); err == nil {
			if n, ok := v.(int64); ok && n > 0 {
				l.mu.Lock()
				l.lost += uint64(n)
				l.mu.Unlock()
			}
		}
	}
	if len(rm) == 0 {
		return
	}
	if _, err := l.s.eval(releaseScript, l.keys, rm...); err != nil {
		l.mu.Lock()
		for _, id := range rm[:min(len(rm), maxOrphans-len(l.orphans))] {
			l.orphans = append(l.orphans, id.(string))
		}
		l.mu.Unlock()
	}
}

// Stats returns the limiter's counters; InFlight is the leases this
// replica holds, Limit the shared limit.
func (l *Concurrency) Stats() sluice.Stats {
	l.mu.Lock()
	n := len(l.held)
	l.mu.Unlock()
	return l.c.stats(float64(l.cfg.Limit), n)
}

// LimiterStats returns the counters beyond sluice.Stats.
func (l *Concurrency) LimiterStats() LimiterStats {
	s := l.c.limiterStats()
	l.mu.Lock()
	s.Lost = l.lost
	l.mu.Unlock()
	return s
}
