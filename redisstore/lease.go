package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
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

// ConcurrencyConfig configures a Concurrency limiter, or a
// KeyedConcurrency (a limit per key).
type ConcurrencyConfig struct {
	// Key names the shared limit; the set lives at "sluice:conc:{Key}"
	// (one Cluster slot). For a KeyedConcurrency it names the family of
	// limits, and key k's set lives at "sluice:conc:Key:{k}". Required, at
	// most 1,000 bytes.
	Key string
	// Limit is the most leases held at once by all replicas together (per
	// key, for a KeyedConcurrency): 1 to MaxLimit. Required.
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
	// MaxKeys caps the keys of a KeyedConcurrency's FailLocal limiter in
	// the process (keys in flight are never evicted). Default
	// DefaultMaxKeys. Unused by Concurrency.
	MaxKeys int
}

func (cfg *ConcurrencyConfig) check() error {
	if cfg.Key == "" {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", nil, "required")
	}
	if len(cfg.Key) > MaxKeyLen-24 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", len(cfg.Key), "key length must be at most 1000 bytes")
	}
	if cfg.Limit < 1 || cfg.Limit > MaxLimit {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Limit", cfg.Limit, "must be between 1 and 1000000")
	}
	if err := durField("ConcurrencyConfig.TTL", &cfg.TTL, DefaultLeaseTTL, 100*time.Millisecond, time.Hour); err != nil {
		return err
	}
	if cfg.MaxWait < 0 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.MaxWait", cfg.MaxWait, "must be >= 0")
	}
	if err := durField("ConcurrencyConfig.PollMin", &cfg.PollMin, DefaultPollMin, 100*time.Microsecond, time.Second); err != nil {
		return err
	}
	if err := durField("ConcurrencyConfig.PollMax", &cfg.PollMax, max(DefaultPollMax, cfg.PollMin), cfg.PollMin, time.Second); err != nil {
		return err
	}
	if err := cfg.Failure.check(); err != nil {
		return err
	}
	if cfg.Replicas < 0 || cfg.Replicas > 10000 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Replicas", cfg.Replicas, "must be between 0 and 10000")
	}
	return intField("ConcurrencyConfig.MaxKeys", &cfg.MaxKeys, DefaultMaxKeys, 1, 1e7)
}

// leases is what Concurrency and KeyedConcurrency share: the leases this
// replica holds, in Redis sorted sets (one per limit), acquired by one
// script, renewed together every TTL/3 by one goroutine, and the orphans
// it still has to remove. Its Release and Cancel end a lease: it is the
// sluice.Releaser of their permits.
type leases struct {
	s     *Store
	cfg   ConcurrencyConfig
	ttlMs int64
	id    string // replica prefix of lease ids

	mu      sync.Mutex
	seq     uint64
	held    map[uint64]lease // token → lease
	orphans []lease          // leases maybe in Redis that no permit holds: removed by the renewer
	lost    uint64

	c    counters
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// lease is one lease: its set and its member.
type lease struct{ set, id string }

func (l *leases) start(s *Store, cfg ConcurrencyConfig) {
	l.s, l.cfg, l.ttlMs, l.id = s, cfg, cfg.TTL.Milliseconds(), newID()
	l.held = make(map[uint64]lease)
	l.quit, l.done = make(chan struct{}), make(chan struct{})
	go l.renewer()
}

// Close stops renewing the leases; those still held expire after TTL
// unless released. It does not close the store.
func (l *leases) Close() {
	l.once.Do(func() { close(l.quit); <-l.done })
}

// acquire takes a lease in set, polling while wait and the set is full;
// local is the failure policy's limiter.
func (l *leases) acquire(ctx context.Context, wait bool, set string, local func() (sluice.Permit, error)) (sluice.Permit, error) {
	var deadline <-chan time.Time
	if wait && l.cfg.MaxWait > 0 {
		t := time.NewTimer(l.cfg.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	keys := []string{set}
	poll := l.cfg.PollMin
	for {
		l.mu.Lock()
		l.seq++
		tok := l.seq
		l.mu.Unlock()
		ls := lease{set, l.id + ":" + strconv.FormatUint(tok, 36)}
		v, err := l.s.eval(acquireScript, keys, l.cfg.Limit, l.ttlMs, ls.id)
		var a [3]int64
		if err == nil {
			if err = parseInts(v, a[:]); err != nil {
				l.orphan(ls) // Redis answered: the script ran
			}
		} else if sentMaybe(err) {
			l.orphan(ls)
		}
		if err != nil {
			return l.c.fail(l.cfg.Failure, l.s.cfg.BreakerCooldown, local)
		}
		if a[0] == 1 {
			l.mu.Lock()
			l.held[tok] = ls
			l.mu.Unlock()
			l.c.admit()
			return sluice.NewPermit(l, tok), nil
		}
		if !wait {
			return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonLimit, 0))
		}
		t := time.NewTimer(poll/2 + rand.N(poll/2+1))
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

// replicas is the N of FailLocal's limit/N.
func (l *leases) replicas() int {
	if l.cfg.Replicas > 0 {
		return l.cfg.Replicas
	}
	return l.s.Replicas()
}

// localLimit is FailLocal's limit in this process: ceil(Limit/n).
func (l *leases) localLimit(n int) int { return max(1, (l.cfg.Limit+n-1)/n) }

// orphan remembers a lease that may be in Redis though no permit holds it
// (an acquire whose answer was lost, a release that failed), so that the
// renewer removes it when Redis answers again; at worst it holds a slot
// for TTL. Only calls that may have reached Redis make orphans: with the
// breaker open, failed acquires cost nothing here.
func (l *leases) orphan(ls lease) {
	l.mu.Lock()
	if len(l.orphans) < maxOrphans {
		l.orphans = append(l.orphans, ls)
	}
	l.mu.Unlock()
}

// Release removes the lease (sluice.Releaser). If Redis does not answer,
// the lease expires after TTL.
func (l *leases) Release(tok uint64, _ sluice.Outcome, _ time.Duration) { l.drop(tok) }

// Cancel is Release: a lease that never ran frees its slot the same way.
func (l *leases) Cancel(tok uint64) { l.drop(tok) }

func (l *leases) drop(tok uint64) {
	l.mu.Lock()
	ls, ok := l.held[tok]
	delete(l.held, tok)
	l.mu.Unlock()
	if ok {
		// Whether or not the call reached Redis, the lease may still be
		// there: orphan it on any failure (at most one per lease held).
		if _, err := l.s.eval(releaseScript, []string{ls.set}, ls.id); err != nil {
			l.orphan(ls)
		}
	}
}

// renewer renews every held lease each TTL/3, and removes orphaned ones.
func (l *leases) renewer() {
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

// renewOnce renews the held leases, one round trip per set that has some,
// then removes up to orphanBatch orphans, one ZREM per set: with one set
// (Concurrency) at most two round trips, so a backlog of orphans never
// delays the next renewal. The newest orphans go first: the oldest are
// the likeliest to have expired by themselves.
func (l *leases) renewOnce() {
	renew := map[string][]any{}
	l.mu.Lock()
	for _, ls := range l.held {
		args := renew[ls.set]
		if args == nil {
			args = []any{l.ttlMs}
		}
		renew[ls.set] = append(args, ls.id)
	}
	n := min(len(l.orphans), orphanBatch)
	rm := map[string][]any{}
	for _, ls := range l.orphans[len(l.orphans)-n:] {
		rm[ls.set] = append(rm[ls.set], ls.id)
	}
	l.orphans = l.orphans[:len(l.orphans)-n]
	l.mu.Unlock()
	for set, args := range renew {
		if v, err := l.s.eval(renewScript, []string{set}, args...); err == nil {
			if n, ok := v.(int64); ok && n > 0 {
				l.mu.Lock()
				l.lost += uint64(n)
				l.mu.Unlock()
			}
		}
	}
	for set, ids := range rm {
		if _, err := l.s.eval(releaseScript, []string{set}, ids...); err != nil {
			l.mu.Lock()
			for _, id := range ids[:min(len(ids), maxOrphans-len(l.orphans))] {
				l.orphans = append(l.orphans, lease{set, id.(string)})
			}
			l.mu.Unlock()
		}
	}
}

// stats are the counters; InFlight is the leases this replica holds.
func (l *leases) stats() sluice.Stats {
	l.mu.Lock()
	n := len(l.held)
	l.mu.Unlock()
	return l.c.stats(float64(l.cfg.Limit), n)
}

// LimiterStats returns the counters beyond sluice.Stats.
func (l *leases) LimiterStats() LimiterStats {
	s := l.c.limiterStats()
	l.mu.Lock()
	s.Lost = l.lost
	l.mu.Unlock()
	return s
}
