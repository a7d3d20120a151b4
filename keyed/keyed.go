package keyed

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// Map holds one limiter per key, made by Config.New, with at most MaxKeys
// live keys. It is safe for concurrent use. Make one with New.
//
// When a new key arrives and MaxKeys keys are live, the Map evicts a key
// that has been idle for IdleTimeout (and holds no permits) if a bounded look
// finds one; otherwise the new key is not stored and shares the overflow
// limiter (Config.New(OverflowKey)) with every other key that did not fit.
// Live keys are never evicted to make room: a client rotating keys cannot
// push the legitimate keys out for free, and every key it rotates through
// past the cap is limited together, as one.
type Map[L sluice.Limiter] struct {
	t        table[L]
	cfg      Config[L]
	gran     int64 // granularity of last-use times
	overflow L
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
		return nil, fmt.Errorf("keyed: Config.New(OverflowKey): %w", err)
	}
	if any(of) == nil {
		return nil, noLimiter("Config.New(OverflowKey)")
	}
	m := &Map[L]{cfg: cfg, gran: int64(cfg.IdleTimeout) / 64, overflow: of}
	m.t.init(cfg.MaxKeys, int64(cfg.IdleTimeout), busy[L], 0)
	return m, nil
}

// noLimiter is the error for a Config.New that returned a nil interface and
// no error: a limiter no method can be called on. Stored, it would panic
// far from the mistake, in the sweep of another key's insertion.
func noLimiter(call string) error {
	return invalid(call, nil, "returned no limiter (a nil interface) and no error")
}

// busy reports whether l holds permits or has callers waiting: such a key is
// never evicted however long ago it was last looked up, since a fresh limiter
// for it would admit on top of the work the old one still holds.
func busy[L sluice.Limiter](l L) bool {
	st := l.Stats()
	return st.InFlight > 0 || st.Queued > 0
}

// Get returns the limiter of key, making it if key is new. When key is new and
// does not fit (see Map), Get returns the overflow limiter. The error is
// Config.New's, wrapped.
//
// Prefer Map.Acquire and Map.TryAcquire to acquiring from what Get returns:
// they give back a permit taken from a limiter evicted between the lookup
// and the acquisition, and acquire again from the key's live one; a limiter
// kept from Get is not checked, and may have been evicted once the key has
// gone IdleTimeout without a lookup.
func (m *Map[L]) Get(key string) (L, error) {
	return m.get(key, clock.Nanos())
}

// GetAt is Get at time now: the explicit-time form for the simulator.
func (m *Map[L]) GetAt(now time.Time, key string) (L, error) {
	return m.get(key, clock.FromTime(now))
}

func (m *Map[L]) get(key string, now int64) (L, error) {
	l, _, err := m.lookup(key, now)
	return l, err
}

// lookup is get, also returning the word of the key's slot (nil for the
// overflow limiter), which is retired once the key is evicted.
func (m *Map[L]) lookup(key string, now int64) (L, *atomic.Int64, error) {
	now = max(now, retired+1) // a time saturated at the far past is not a tombstone
	h := m.t.hash(key)
	s := m.t.shardOf(h)
	x := s.load()
	if i := x.find(h); i >= 0 {
		e := &x.slots[i]
		if touch(&e.last, now, m.gran) {
			return e.v, &e.last, nil
		}
	}
	return m.insert(s, h, key, now)
}

// touch records a use at now, and reports false if the slot was retired
// meanwhile (the caller looks again under the lock). It writes only when
// the recorded time is more than gran old, so that a hot key does not turn
// every read into a write bouncing the slot's cache line between cores.
func touch(p *atomic.Int64, now, gran int64) bool {
	for {
		old := p.Load()
		switch {
		case old == retired:
			return false
		case now-old <= gran || p.CompareAndSwap(old, now):
			return true
		}
	}
}

// insert is the slow path of get: key (hash h) was not found without the
// lock.
func (m *Map[L]) insert(s *shard[L], h uint64, key string, now int64) (L, *atomic.Int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.load()
	if i := x.find(h); i >= 0 { // another caller inserted it meanwhile
		e := &x.slots[i]
		touch(&e.last, now, 0) // under the lock, never retired
		return e.v, &e.last, nil
	}
	var zero L
	if !m.t.reserve(s, now) {
		return m.overflow, nil, nil
	}
	// The slot is given back unless a limiter fills it, however New ends:
	// an error, a nil, or a panic (net/http recovers a handler's; a slot
	// lost to each would fill MaxKeys for good).
	stored := false
	defer func() {
		if !stored {
			m.t.live.Add(-1)
		}
	}()
	l, err := m.cfg.New(key)
	switch {
	case err != nil:
		err = fmt.Errorf("keyed: Config.New(%.64q): %w", key, err)
	case any(l) == nil:
		err = noLimiter(fmt.Sprintf("Config.New(%.64q)", key))
	}
	if err != nil {
		return zero, nil, err
	}
	i := s.add(h, l, now)
	stored = true
	return l, &s.load().slots[i].last, nil
}

// Acquire acquires from key's limiter (see Get): it waits as that limiter
// does, and returns its permit or its error.
func (m *Map[L]) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	return m.acquire(key, func(l L) (sluice.Permit, error) { return l.Acquire(ctx) })
}

// TryAcquire acquires from key's limiter without waiting.
func (m *Map[L]) TryAcquire(key string) (sluice.Permit, error) {
	return m.acquire(key, func(l L) (sluice.Permit, error) { return l.TryAcquire() })
}

// acquire looks key up and acquires from its limiter. The sweep cannot see
// a caller between the lookup and the acquisition (its limiter is not yet
// busy), so it may evict the key in that gap, and the next lookup would make
// a second limiter for it. So the caller checks the key's word after
// acquiring: the sweep retires the word before it asks whether the limiter
// is busy (see shard.sweep), so either the sweep saw this permit and kept
// the key, or the word reads retired here, and the caller gives the permit
// back and looks again. Pinning the key instead would write the key's slot
// on every call, the line lookups only read; this costs one load of a line
// already in cache. A rebuild also retires words (it moves the key, limiter
// and all): kept checks, under the lock, whether the key still has l.
func (m *Map[L]) acquire(key string, acq func(L) (sluice.Permit, error)) (sluice.Permit, error) {
	for {
		l, w, err := m.lookup(key, clock.Nanos())
		if err != nil {
			return sluice.Permit{}, err
		}
		p, err := acq(l)
		if w != nil && w.Load() == retired && !m.kept(key, l) {
			if err == nil {
				p.Cancel() // the work has not run: as if never admitted
			}
			continue
		}
		m.t.count(err)
		return p, err
	}
}

// kept reports whether key's limiter is still l, under the shard's lock, so
// that no sweep can evict it before the caller's permit makes it busy. A
// limiter whose type cannot be compared counts as not kept: the caller
// only retries.
func (m *Map[L]) kept(key string, l L) bool {
	h := m.t.hash(key)
	s := m.t.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.load()
	i := x.find(h)
	if i < 0 {
		return false
	}
	a, b := any(l), any(x.slots[i].v)
	t := reflect.TypeOf(a)
	return t != nil && t.Comparable() && a == b
}

// For returns key's limiter as a sluice.Limiter, for composition with
// sluice.All or for code that takes a Limiter. Each call goes through the Map,
// so the key's idle time and the Map's counters stay right, and a key evicted
// in between comes back.
func (m *Map[L]) For(key string) sluice.Limiter { return mapKey[L]{m, key} }

type mapKey[L sluice.Limiter] struct {
	m   *Map[L]
	key string
}

func (k mapKey[L]) Acquire(ctx context.Context) (sluice.Permit, error) {
	return k.m.Acquire(ctx, k.key)
}

func (k mapKey[L]) TryAcquire() (sluice.Permit, error) { return k.m.TryAcquire(k.key) }

// Stats returns the key's limiter's own statistics. Like Get, it makes the
// key's limiter if the key is new.
func (k mapKey[L]) Stats() sluice.Stats {
	l, err := k.m.Get(k.key)
	if err != nil {
		return sluice.Stats{}
	}
	return l.Stats()
}

// Stats reads the Map's counters without taking any lock. Limit, InFlight
// and Queued are 0: they belong to the keys' limiters.
func (m *Map[L]) Stats() Stats { return m.t.stats() }

// Overflow returns the limiter shared by the keys that did not fit.
func (m *Map[L]) Overflow() L { return m.overflow }
