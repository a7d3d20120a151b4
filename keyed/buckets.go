package keyed

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/rate"
)

// BucketsConfig configures Buckets.
type BucketsConfig struct {
	// Bucket is every key's token bucket, as rate.Config documents it,
	// with two restrictions that let a key cost one word: Rate must be
	// above 0 and at most 1e9 per second (time is kept in whole
	// nanoseconds), and Burst at least 1. Burst/Rate (the time to refill a
	// bucket) must not exceed 2^60 ns (36 years). MaxWait bounds how long
	// Acquire waits for a token (0: only the context's deadline does).
	Bucket rate.Config

	// Overflow is the bucket that the keys beyond MaxKeys share. Default
	// (nil): a new bucket with the Bucket config, so that a flood of
	// distinct keys gets one key's rate in total.
	Overflow *rate.Bucket

	// MaxKeys is the hard cap on live keys. Default DefaultMaxKeys.
	MaxKeys int

	// IdleTimeout is how long a key's bucket must have been full before the
	// key may be evicted to make room. Evicting a full bucket loses nothing
	// (a new key starts full), so this only trades memory for CPU: a client
	// that comes back within IdleTimeout finds its key instead of
	// inserting it again. Default DefaultIdleTimeout (1 minute).
	IdleTimeout time.Duration
}

// Buckets is a token bucket per key, with at most MaxKeys live keys. It is
// safe for concurrent use; Allow takes a shard's read lock, one clock read
// and one compare-and-swap, and does not allocate.
//
// Every key has the same rate and burst, so a key is only the time its
// bucket was empty: one word, beside the key's hash (see the package doc for
// the bytes per key). A key whose bucket has refilled is indistinguishable
// from a new key, so evicting it (lazily, once it has been full for
// IdleTimeout) never hands anyone a free burst. When MaxKeys keys are live
// and none can be evicted, a new key is served by the shared Overflow
// bucket.
type Buckets struct {
	t        table[struct{}]
	interval int64 // nanos per token
	tau      int64 // nanos to refill an empty bucket: burst*interval
	rate     float64
	maxWait  time.Duration
	overflow *rate.Bucket
	waiting  atomic.Int64
}

// NewBuckets validates cfg and returns an empty Buckets.
func NewBuckets(cfg BucketsConfig) (*Buckets, error) {
	c := cfg.Bucket
	switch {
	case math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > 1e9:
		return nil, fmt.Errorf("%w: Bucket.Rate is %v, want > 0 and <= 1e9", ErrInvalidConfig, c.Rate)
	case c.Burst < 1:
		return nil, fmt.Errorf("%w: Bucket.Burst is %d, want >= 1", ErrInvalidConfig, c.Burst)
	case 1e9/c.Rate*float64(c.Burst) > 1<<60:
		return nil, fmt.Errorf("%w: Bucket.Burst/Bucket.Rate is %v s, want <= 2^60 ns", ErrInvalidConfig, float64(c.Burst)/c.Rate)
	case c.MaxWait < 0:
		return nil, fmt.Errorf("%w: Bucket.MaxWait is %v, want >= 0", ErrInvalidConfig, c.MaxWait)
	}
	maxKeys, err := validMaxKeys(cfg.MaxKeys)
	if err != nil {
		return nil, err
	}
	idle, err := validIdle(cfg.IdleTimeout)
	if err != nil {
		return nil, err
	}
	b := &Buckets{
		interval: int64(math.Round(1e9 / c.Rate)),
		rate:     c.Rate,
		maxWait:  c.MaxWait,
		overflow: cfg.Overflow,
	}
	b.tau = b.interval * int64(c.Burst)
	if b.overflow == nil {
		if b.overflow, err = rate.NewBucket(c); err != nil {
			return nil, fmt.Errorf("%w: Bucket: %w", ErrInvalidConfig, err)
		}
	}
	// A key's bucket is full, and the key can go at no loss, once the time
	// it was empty is tau in the past; it goes once that is idle older.
	b.t.init(maxKeys, b.tau+int64(idle), nil)
	return b, nil
}

// take is the GCRA step on a key's state e (the time its bucket was empty):
// one token at now, waiting at most maxWait. It returns the new state and
// the wait; when !ok the state must not change and wait is how long until
// the token would be there.
func (b *Buckets) take(e, now, maxWait int64) (ne, wait int64, ok bool) {
	ne = max(e, now-b.tau) + b.interval // unused time beyond tau is lost
	wait = ne - now
	if wait > maxWait {
		return e, wait, false
	}
	return ne, max(wait, 0), true
}

// where is a live key's slot, packed into a permit's token so that a
// cancelled permit can give its token back without allocating: the slot
// number in the low 32 bits, the key's hash's top 32 bits (which also pick
// the shard) in the high ones to check that the slot still holds that key.
type where = uint64

// takeKey takes one token for key at now, waiting at most maxWait. of
// reports that key did not fit and nothing was taken: the caller goes to
// the overflow bucket.
func (b *Buckets) takeKey(key string, now, maxWait int64) (wait int64, w where, ok, of bool, s *shard[struct{}]) {
	h := b.t.hash(key)
	s = b.t.shardOf(h)
	w = h &^ math.MaxUint32
	s.mu.RLock()
	if i := s.find(h); i >= 0 {
		p := &s.at(i).last
		for {
			e := atomic.LoadInt64(p)
			ne, wait, ok := b.take(e, now, maxWait)
			if !ok || atomic.CompareAndSwapInt64(p, e, ne) {
				s.mu.RUnlock()
				return wait, w | where(i), ok, false, s
			}
		}
	}
	s.mu.RUnlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.find(h); i >= 0 { // inserted meanwhile
		e := s.at(i)
		var ne int64
		ne, wait, ok = b.take(e.last, now, maxWait)
		e.last = ne
		return wait, w | where(i), ok, false, s
	}
	if !b.t.reserve(s, now) {
		return 0, 0, false, true, s
	}
	ne, wait, ok := b.take(now-b.tau, now, maxWait) // a new key's bucket is full
	w |= where(s.add(h, struct{}{}, ne))
	return wait, w, ok, false, s
}

// give returns the token of a permit, if its key is still in the slot the
// permit recorded. A key moved in between (by an eviction shifting its
// neighbours, or its shard resizing) keeps one token less, never more.
func (b *Buckets) give(w where) {
	s := b.t.shardOf(w)
	i := int(uint32(w))
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i >= len(s.slots) {
		return
	}
	e := &s.slots[i]
	if e.h&^math.MaxUint32 != w&^math.MaxUint32 {
		return // not the key the permit was for (or no key at all)
	}
	atomic.AddInt64(&e.last, -b.interval)
}

// Allow reports whether key has a token now, and takes it if so.
func (b *Buckets) Allow(key string) bool { return b.allowNanos(key, clock.Nanos()) }

// AllowAt is Allow at time now.
func (b *Buckets) AllowAt(key string, now time.Time) bool {
	return b.allowNanos(key, clock.FromTime(now))
}

func (b *Buckets) allowNanos(key string, now int64) bool {
	_, _, ok, of, s := b.takeKey(key, now, 0)
	if of {
		ok = b.overflow.AllowAt(clock.ToTime(now), 1)
	}
	if ok {
		s.counters.Admit()
	} else {
		s.counters.Reject(sluice.ReasonRate)
	}
	return ok
}

// TryAcquire takes a token for key if there is one now. Otherwise it returns
// a sluice.ReasonRate rejection whose RetryAfter is the time until there is.
// Cancelling the permit gives the token back (see sluice.All); releasing it
// otherwise does nothing.
func (b *Buckets) TryAcquire(key string) (sluice.Permit, error) {
	wait, w, ok, of, s := b.takeKey(key, clock.Nanos(), 0)
	if of {
		p, err := b.overflow.TryAcquire()
		count(s, err)
		return p, err
	}
	if !ok {
		s.counters.Reject(sluice.ReasonRate)
		return sluice.Permit{}, sluice.RejectRate(sluice.ReasonRate, time.Duration(wait))
	}
	s.counters.Admit()
	return sluice.NewPermit((*releaser)(b), w), nil
}

// Acquire waits for a token for key, as rate.Bucket.Acquire does: it fails
// at once, taking nothing, if the token would come after ctx's deadline
// (sluice.ReasonDeadline) or after BucketsConfig.Bucket.MaxWait
// (sluice.ReasonQueueTimeout); if ctx is done while waiting, the token is
// given back and ctx.Err() returned.
func (b *Buckets) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	now := clock.Nanos()
	limit, why := int64(math.MaxInt64), sluice.ReasonRate
	if b.maxWait > 0 {
		limit, why = int64(b.maxWait), sluice.ReasonQueueTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		// The token must come strictly before the deadline: at the
		// deadline the context is already done.
		if rem := clock.FromTime(dl) - now - 1; rem < limit {
			limit, why = max(rem, 0), sluice.ReasonDeadline
		}
	}
	wait, w, ok, of, s := b.takeKey(key, now, limit)
	if of {
		p, err := b.overflow.Acquire(ctx)
		count(s, err)
		return p, err
	}
	if !ok {
		s.counters.Reject(why)
		return sluice.Permit{}, sluice.RejectRate(why, time.Duration(wait))
	}
	if wait > 0 {
		b.waiting.Add(1)
		t := time.NewTimer(time.Duration(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			b.waiting.Add(-1)
			b.give(w)
			return sluice.Permit{}, ctx.Err()
		}
		b.waiting.Add(-1)
	}
	s.counters.Admit()
	return sluice.NewPermit((*releaser)(b), w), nil
}

// releaser keeps Release out of Buckets' method set.
type releaser Buckets

func (r *releaser) Release(w uint64, o sluice.Outcome, _ time.Duration) {
	if o == sluice.Canceled {
		(*Buckets)(r).give(w)
	}
}

// Tokens returns the tokens key has now (negative while callers wait for
// tokens not yet there), without storing key if it is new.
func (b *Buckets) Tokens(key string) float64 { return b.tokensNanos(key, clock.Nanos()) }

// TokensAt is Tokens at time now.
func (b *Buckets) TokensAt(key string, now time.Time) float64 {
	return b.tokensNanos(key, clock.FromTime(now))
}

func (b *Buckets) tokensNanos(key string, now int64) float64 {
	h := b.t.hash(key)
	s := b.t.shardOf(h)
	e := now - b.tau // a key not stored has a full bucket
	s.mu.RLock()
	if i := s.find(h); i >= 0 {
		e = max(e, atomic.LoadInt64(&s.at(i).last))
	}
	s.mu.RUnlock()
	return float64(now-e) / float64(b.interval)
}

// For returns key's bucket as a sluice.Limiter, for composition with
// sluice.All. Its Stats are the whole Buckets' (per-key counters would cost
// memory per key).
func (b *Buckets) For(key string) sluice.Limiter { return bucketsKey{b, key} }

type bucketsKey struct {
	b   *Buckets
	key string
}

func (k bucketsKey) Acquire(ctx context.Context) (sluice.Permit, error) {
	return k.b.Acquire(ctx, k.key)
}
func (k bucketsKey) TryAcquire() (sluice.Permit, error) { return k.b.TryAcquire(k.key) }
func (k bucketsKey) Stats() sluice.Stats                { return k.b.Stats().Stats }

// Stats reads the counters without taking any lock: Limit is the per-key
// rate, Queued the callers waiting in Acquire; admissions and rejections
// include the overflow bucket's.
func (b *Buckets) Stats() Stats {
	st := b.t.stats()
	st.Limit = b.rate
	st.Queued = int(b.waiting.Load())
	return st
}

// Overflow returns the bucket shared by the keys that did not fit.
func (b *Buckets) Overflow() *rate.Bucket { return b.overflow }
