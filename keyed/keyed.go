package keyed

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// Map holds one limiter per key, made by Config.New, with at most MaxKeys
// live keys. It is safe for concurrent use. Make one with New.
//
// When a new key arrives and its shard is full, the Map evicts a key that has
// been idle for IdleTimeout (and holds no permits) if a bounded look finds
// one; otherwise the new key is not stored and shares the overflow limiter
// (Config.New(OverflowKey)) with every other key that did not fit. Live keys
// are never evicted to make room: a client rotating keys cannot push the
// legitimate keys out for free, and every key it rotates through past the cap
// is limited together, as one.
type Map[L sluice.Limiter] struct {
	cfg      Config[L]
	idle     int64 // cfg.IdleTimeout in nanos
	gran     int64 // granularity of last-use times
	seed     maphash.Seed
	shift    uint // 64 - log2(len(shards))
	shards   []shard[L]
	overflow L
	live     atomic.Int64
}

// New validates cfg and returns a Map. It calls cfg.New(OverflowKey) once to
// build the overflow limiter.
func New[L sluice.Limiter](cfg Config[L]) (*Map[L], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	of, err := cfg.New(OverflowKey)
	if err != nil {
		return nil, fmt.Errorf("keyed: New(OverflowKey): %w", err)
	}
	n := shardCount(cfg.MaxKeys)
	m := &Map[L]{
		cfg:      cfg,
		idle:     int64(cfg.IdleTimeout),
		gran:     int64(cfg.IdleTimeout) / 64,
		seed:     maphash.MakeSeed(),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		shards:   make([]shard[L], n),
		overflow: of,
	}
	for i := range m.shards {
		c := cfg.MaxKeys / n
		if i < cfg.MaxKeys%n {
			c++
		}
		m.shards[i].init(c)
	}
	return m, nil
}

// shardCount picks a power of two giving each shard at least 512 keys (so
// that the per-shard split of the cap stays close to MaxKeys even with
// unevenly hashed keys), at most 64 shards.
func shardCount(maxKeys int) int {
	n := 1
	for n < 64 && maxKeys/(2*n) >= 512 {
		n *= 2
	}
	return n
}

func (m *Map[L]) shard(key string) *shard[L] {
	if len(m.shards) == 1 {
		return &m.shards[0]
	}
	return &m.shards[maphash.String(m.seed, key)>>m.shift]
}

// Get returns the limiter of key, making it if key is new. When key is new and
// does not fit (see Map), Get returns the overflow limiter. The error is
// Config.New's, wrapped.
func (m *Map[L]) Get(key string) (L, error) {
	l, _, err := m.get(key, clock.Nanos())
	return l, err
}

// GetAt is Get at time now: the explicit-time form for the simulator.
func (m *Map[L]) GetAt(key string, now time.Time) (L, error) {
	l, _, err := m.get(key, clock.FromTime(now))
	return l, err
}

func (m *Map[L]) get(key string, now int64) (L, *shard[L], error) {
	s := m.shard(key)
	s.mu.RLock()
	if i, ok := s.index[key]; ok {
		e := s.at(i)
		touch(&e.last, now, m.gran)
		l := e.l
		s.mu.RUnlock()
		return l, s, nil
	}
	s.mu.RUnlock()
	l, err := m.insert(s, key, now)
	return l, s, err
}

// insert is the slow path of get: key was not found under the read lock.
func (m *Map[L]) insert(s *shard[L], key string, now int64) (L, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[key]; ok { // another caller inserted it meanwhile
		e := s.at(i)
		e.last = now
		return e.l, nil
	}
	evicted := s.sweep(now, m.idle, sweepStep)
	if s.n >= s.cap {
		evicted += s.sweep(now, m.idle, fullSweepStep)
	}
	m.live.Add(-int64(evicted))
	if s.n >= s.cap {
		s.overflowed.Add(1)
		return m.overflow, nil
	}
	l, err := m.cfg.New(key)
	if err != nil {
		var zero L
		return zero, fmt.Errorf("keyed: New(%.64q): %w", key, err)
	}
	// The Map keeps key: clone it so that it does not pin a larger buffer
	// the caller sliced it from (a request header, a read buffer).
	s.add(cloneString(key), l, now)
	m.live.Add(1)
	return l, nil
}

func cloneString(s string) string { return string(append([]byte(nil), s...)) }

// Acquire acquires from key's limiter (see Get): it waits as that limiter
// does, and returns its permit or its error.
func (m *Map[L]) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	l, s, err := m.get(key, clock.Nanos())
	if err != nil {
		return sluice.Permit{}, err
	}
	p, err := l.Acquire(ctx)
	count(s, err)
	return p, err
}

// TryAcquire acquires from key's limiter without waiting.
func (m *Map[L]) TryAcquire(key string) (sluice.Permit, error) {
	l, s, err := m.get(key, clock.Nanos())
	if err != nil {
		return sluice.Permit{}, err
	}
	p, err := l.TryAcquire()
	count(s, err)
	return p, err
}

func count[L sluice.Limiter](s *shard[L], err error) {
	switch {
	case err == nil:
		s.counters.Admit()
	case sluice.ReasonOf(err) != sluice.ReasonUnknown:
		s.counters.Reject(sluice.ReasonOf(err))
	}
}

// For returns key's limiter as a sluice.Limiter, for composition with
// sluice.All or for code that takes a Limiter. Each call goes through the Map,
// so the key's idle time and the Map's counters stay right, and a key evicted
// in between comes back.
func (m *Map[L]) For(key string) sluice.Limiter { return keyLimiter[L]{m, key} }

type keyLimiter[L sluice.Limiter] struct {
	m   *Map[L]
	key string
}

func (k keyLimiter[L]) Acquire(ctx context.Context) (sluice.Permit, error) {
	return k.m.Acquire(ctx, k.key)
}
func (k keyLimiter[L]) TryAcquire() (sluice.Permit, error) { return k.m.TryAcquire(k.key) }

// Stats returns the key's limiter's own statistics.
func (k keyLimiter[L]) Stats() sluice.Stats {
	l, err := k.m.Get(k.key)
	if err != nil {
		return sluice.Stats{}
	}
	return l.Stats()
}

// Stats is a snapshot of a Map's keys and counters.
type Stats struct {
	// Admitted and Rejected count the Map's Acquire and TryAcquire calls
	// (and those through For), over all keys; a cancelled wait is not a
	// rejection. Limit, InFlight and Queued are 0: they belong to the
	// keys' limiters.
	sluice.Stats
	// Keys is the number of live keys, at most MaxKeys.
	Keys int
	// MaxKeys is the configured cap.
	MaxKeys int
	// Created counts limiters made for keys (the overflow limiter aside).
	Created uint64
	// Evicted counts keys removed after IdleTimeout without use.
	Evicted uint64
	// Overflowed counts lookups of new keys that did not fit and got the
	// overflow limiter. Steady growth means MaxKeys is too small for the
	// traffic, or someone is rotating keys.
	Overflowed uint64
}

// Stats reads the counters without taking any lock.
func (m *Map[L]) Stats() Stats {
	st := Stats{Keys: int(m.live.Load()), MaxKeys: m.cfg.MaxKeys}
	for i := range m.shards {
		s := &m.shards[i]
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

// Overflow returns the limiter shared by the keys that did not fit.
func (m *Map[L]) Overflow() L { return m.overflow }
