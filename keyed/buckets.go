package keyed

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/gcra"
	"github.com/sluicehq/sluice/internal/waitrule"
	"github.com/sluicehq/sluice/rate"
)

// BucketsConfig configures Buckets.
type BucketsConfig struct {
	// Bucket is every key's token bucket, as rate.Config documents it:
	// every rate and burst a rate.Bucket accepts, with the same decisions
	// (a key's bucket and a rate.Bucket share their arithmetic). MaxWait
	// bounds how long Acquire waits for a token (0: only the context's
	// deadline does). Under Rate 0 a key that has taken a token is never
	// evicted, since its bucket never refills (see IdleTimeout): once
	// MaxKeys keys have, every new key shares the Overflow bucket, which
	// with the default Overflow never refills either. Rate 0 is a lifetime
	// quota for a bounded set of keys, not a rate limit: a Rate left out
	// is a mistake worth checking for. Under Rate Inf a key holds nothing
	// and any key may be evicted.
	Bucket rate.Config

	// Overflow is the bucket that the keys beyond MaxKeys share. Default
	// (nil): a new bucket with the Bucket config, so that a flood of
	// distinct keys gets one key's rate in total.
	Overflow *rate.Bucket

	// MaxKeys is the hard cap on live keys. Default 65,536.
	MaxKeys int

	// IdleTimeout is how long a key's bucket must have been full before the
	// key may be evicted to make room. Evicting a full bucket loses nothing
	// (a new key starts full), so this only trades memory for CPU: a client
	// that comes back within IdleTimeout finds its key instead of
	// inserting it again. Default 1 minute.
	IdleTimeout time.Duration
}

// Buckets is a token bucket per key, with at most MaxKeys live keys. It is
// safe for concurrent use; Allow on a live key takes no lock: one clock
// read, a lookup and one compare-and-swap on the key's own word, and it
// does not allocate.
//
// Every key has the same rate and burst, so a key is only its bucket's
// state word (the time its bucket was empty, kept as a rate.Bucket keeps
// it), beside the key's hash (docs/design.md, section keyed, has the bytes
// per key).
// The words of a shard count time, in fixed point, from the shard's base,
// which moves when an admission's new word must count from a time too far
// from it: one pass over the shard's keys (at most 4,096 for MaxKeys up to
// 4 million) under its lock, copying them into a new index. The finer the
// rate, the sooner: never in practice below ~15,000 tokens/s, every ~10
// hours at 1e9/s, every ~2 s above ~1.6e13/s. As with a rate.Bucket, a
// read at any time changes nothing and is exact, and so is a refusal. The
// move is exact for every key whose word reaches the new base (±39 h at
// 1e9/s, ±8.6 s at the finest unit); a key full since before that reach
// becomes a new key, as eviction would make it, so that only a time further
// back than the reach reads it full where it had spent tokens.
//
// A key whose bucket has refilled is indistinguishable from a new key, so
// evicting it (lazily, once it has been full for IdleTimeout) never hands
// anyone a free burst. When MaxKeys keys are live and none can be evicted,
// a new key is served by the shared Overflow bucket.
type Buckets struct {
	t        table[struct{}]
	p        gcra.Params
	idle     time.Duration // how long a bucket must have been full to go
	rate     float64
	maxWait  time.Duration
	overflow *rate.Bucket
	waiting  atomic.Int64
}

// NewBuckets validates cfg and returns an empty Buckets.
func NewBuckets(cfg BucketsConfig) (*Buckets, error) {
	c := cfg.Bucket
	switch {
	case math.IsNaN(c.Rate) || c.Rate < 0:
		return nil, invalid("BucketsConfig.Bucket.Rate", c.Rate, "must be >= 0 (+Inf for no limit)")
	case c.Burst < 0:
		return nil, invalid("BucketsConfig.Bucket.Burst", c.Burst, "must be >= 0")
	case c.MaxWait < 0:
		return nil, invalid("BucketsConfig.Bucket.MaxWait", c.MaxWait, "must be >= 0")
	}
	err := rate.ValidOpen(c.Rate, c.Burst)
	if err == nil {
		err = rate.ValidFill(c.Rate, c.Burst)
	}
	if err != nil {
		var ce *sluice.ConfigError
		if errors.As(err, &ce) {
			return nil, invalid("BucketsConfig.Bucket.Burst", c.Burst, ce.Allowed)
		}
		return nil, err
	}
	maxKeys, err := validMaxKeys("BucketsConfig", cfg.MaxKeys)
	if err != nil {
		return nil, err
	}
	idle, err := validIdle("BucketsConfig", cfg.IdleTimeout)
	if err != nil {
		return nil, err
	}
	b := &Buckets{
		p:        gcra.Compile(c.Rate, int64(c.Burst)),
		idle:     idle,
		rate:     c.Rate,
		maxWait:  c.MaxWait,
		overflow: cfg.Overflow,
	}
	if b.overflow == nil {
		if b.overflow, err = rate.NewBucket(c); err != nil {
			return nil, err
		}
	}
	b.t.init(maxKeys, 0, nil, clock.Nanos())
	b.t.stale = b.stale
	return b, nil
}

// stale is the eviction rule: a key may go once its bucket has been full for
// IdleTimeout (now in units of its shard).
func (b *Buckets) stale(e, now int64) bool { return b.p.Full(e, now, b.idle) }

// units returns s's index and now in units of its words, first moving the
// index's base to now (a rebuild) if now is too far from it. The caller
// holds s's lock, and moves the base only to store a word that counts from
// now (a new key's, or a key full at now: see takeLocked); reads never move
// it (see tokensNanos).
//
// The move is exact for every word that fits relative to now. One that
// does not is either before now by more than a word reaches (2^63 units,
// 39 h at 1e9/s, 8.6 s at the finest unit): its bucket is full at every
// time from about now minus that reach on, so it becomes a new key's word,
// full at any time, as eviction would leave it (only a time further back
// than the reach then reads full where the key had spent tokens); or after
// now by more than that (a debt counted from a far later time): it
// saturates at the longest debt a word holds (gcra.Moved). Keeping the
// clamped word instead, as once, was wrong by the whole distance once the
// base moved back: a key drained at t0 read 33 h in debt at t0 after
// another key's admission 72 h later.
func (b *Buckets) units(s *shard[struct{}], now int64) (*index[struct{}], int64) {
	x := s.load()
	if u, in := b.p.Units(now, x.base); in {
		return x, u
	}
	from := x.base
	x = s.rebuild(len(x.slots), now, func(w int64) int64 {
		nw, exact := b.p.Moved(w, from, now)
		if !exact && nw < 0 { // full at every time the new base reaches
			return gcra.EMin
		}
		return nw
	})
	return x, 0
}

// tooLarge reports that no key can ever have a token: burst 0.
func (b *Buckets) tooLarge() bool { return b.p.Mode != gcra.Inf && b.p.Burst < 1 }

// wait converts a wait from the arithmetic (units, -1 never) to a duration.
func (b *Buckets) wait(w int64) time.Duration {
	if w < 0 {
		return -1
	}
	return b.p.ToDuration(w)
}

// reason is why a request whose token would come after wait was rejected:
// why if it ever comes.
func (b *Buckets) reason(wait time.Duration, why sluice.Reason) sluice.Reason {
	switch {
	case wait >= 0:
		return why
	case b.tooLarge():
		return sluice.ReasonTooLarge
	}
	return sluice.ReasonRate // rate 0 and the bucket is empty: never
}

// where is a permit's token: the key's whole hash, which is the key's
// identity in the table (see table.hash), so that a cancelled permit finds
// its key again without allocating, in whatever slot a rebuild moved it to,
// and can never credit another key (a slot number and part of the hash
// could, once a rebuild had moved a key sharing that part into the slot).
type where = uint64

// take takes one token from the word at p at u, waiting at most mw units.
// It reports !done if the word was retired: the slot is no longer the
// key's, and the caller looks again under the lock.
func (b *Buckets) take(p *atomic.Int64, u, mw int64) (wu int64, ok, done bool) {
	for {
		e := p.Load()
		if e == retired {
			return 0, false, false
		}
		if mw == 0 && b.p.Mode == gcra.Rate { // Allow and TryAcquire: inlined
			ne, ok := b.p.TakeOne(e, u)
			switch {
			case !ok:
				return gcra.SatSub(ne, u), false, true
			case p.CompareAndSwap(e, ne):
				return 0, true, true
			}
			continue
		}
		ne, wu, ok := b.p.Take(e, u, 1, mw)
		if !ok || ne == e || p.CompareAndSwap(e, ne) {
			return wu, ok, true
		}
	}
}

// takeKey takes one token for key at now, waiting at most maxWait. of
// reports that key did not fit and nothing was taken: the caller goes to
// the overflow bucket. When !ok, wait is how long until the token would be
// there, -1 if never.
//
// A live key's admission takes no lock: it loads its shard's index, finds
// the slot and updates the key's word with a compare-and-swap, writing no
// line but the key's own. The lock is taken to insert a key, to move the
// base, and when the index was replaced under the caller.
func (b *Buckets) takeKey(key string, now int64, maxWait time.Duration) (wait time.Duration, w where, ok, of bool) {
	h := b.t.hash(key)
	if b.tooLarge() {
		return -1, 0, false, false
	}
	s := b.t.shardOf(h)
	mw := b.p.ToUnits(int64(maxWait))
	x := s.load()
	if i := x.find(h); i >= 0 {
		if u, in := b.p.Units(now, x.base); in {
			if wu, ok, done := b.take(&x.slots[i].last, u, mw); done {
				return b.wait(wu), h, ok, false
			}
		}
	}
	return b.takeLocked(s, h, now, maxWait)
}

// takeLocked is takeKey's path under the shard's lock: key (hash h) was not
// found, now is too far from its shard's base, or its index was replaced.
// Kept apart so that the lock-free path has no deferred unlock to set up.
func (b *Buckets) takeLocked(s *shard[struct{}], h uint64, now int64, maxWait time.Duration) (wait time.Duration, w where, ok, of bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wait, ok, done := b.takeFar(s, h, now, maxWait); done {
		return wait, h, ok, false
	}
	x, u := b.units(s, now)
	mw := b.p.ToUnits(int64(maxWait))
	if i := x.find(h); i >= 0 { // inserted or moved meanwhile, or its base moved
		wu, ok, _ := b.take(&x.slots[i].last, u, mw) // only the lock's holder retires
		return b.wait(wu), h, ok, false
	}
	if !b.t.reserve(s, u) {
		return 0, 0, false, true
	}
	ne, wu, ok := b.p.Take(b.p.Initial(), u, 1, mw) // a new key's bucket is full
	s.add(h, struct{}{}, ne)
	return b.wait(wu), h, ok, false
}

// takeFar decides the take of a stored key (hash h) at a now too far from
// its shard's base to count in its units, without moving the base, as a
// rate.Bucket does (gcra.TakeFar): a refusal writes nothing, and a take
// from a bucket not full at now starts at its word, so its new word counts
// from the base as the old one did. It reports !done, deciding nothing,
// when now is within reach of the base, the key is not stored, or its
// bucket is full at now: its new word then counts from now, and the caller
// moves the base there. The caller holds s's lock.
func (b *Buckets) takeFar(s *shard[struct{}], h uint64, now int64, maxWait time.Duration) (wait time.Duration, ok, done bool) {
	x := s.load()
	if _, in := b.p.Units(now, x.base); in {
		return 0, false, false
	}
	i := x.find(h)
	if i < 0 {
		return 0, false, false
	}
	p := &x.slots[i].last // lock-free takes may update it, never retire it
	for {
		e := p.Load()
		ne, moved, wait, ok := b.p.TakeFar(e, x.base, now, 1, maxWait)
		switch {
		case !ok:
			return wait, false, true
		case moved:
			return 0, false, false
		case ne == e || p.CompareAndSwap(e, ne):
			return wait, true, true
		}
	}
}

// give returns the token of a permit to its key (hash h), wherever a
// rebuild moved it. A key evicted in between is not there to credit, and
// one that came back since starts full: either way it keeps no more than
// its burst (tokens are clamped to the burst when read).
func (b *Buckets) give(h where) {
	s := b.t.shardOf(h)
	if b.refund(s.load(), h) {
		return
	}
	// Not found (maybe only moving) or retired under us: look again under
	// the lock, where no word is retired, so one look settles it.
	s.mu.Lock()
	defer s.mu.Unlock()
	b.refund(s.load(), h)
}

// refund gives one token back to the key with hash h in x, and reports
// false if the key is not there or its word was retired.
func (b *Buckets) refund(x *index[struct{}], h uint64) bool {
	i := x.find(h)
	if i < 0 {
		return false
	}
	p := &x.slots[i].last
	for {
		old := p.Load()
		if old == retired {
			return false
		}
		if p.CompareAndSwap(old, b.p.Refund(old, 1)) {
			return true
		}
	}
}

// Allow reports whether key has a token now, and takes it if so.
func (b *Buckets) Allow(key string) bool { return b.allowNanos(key, clock.Nanos()) }

// AllowAt is Allow at time now.
func (b *Buckets) AllowAt(now time.Time, key string) bool {
	return b.allowNanos(key, clock.FromTime(now))
}

func (b *Buckets) allowNanos(key string, now int64) bool {
	wait, _, ok, of := b.takeKey(key, now, 0)
	why := sluice.ReasonRate
	if of {
		var r rate.Reservation
		r, ok = b.overflow.ReserveAt(clock.ToTime(now), 1, 0)
		why = r.Reason()
	} else if !ok {
		why = b.reason(wait, why)
	}
	if ok {
		b.t.counters.Admit()
	} else {
		b.t.counters.Reject(why)
	}
	return ok
}

// TryAcquire takes a token for key if there is one now. Otherwise it returns
// a sluice.ReasonRate rejection whose RetryAfter is the time until there is.
// Cancelling the permit gives the token back (see sluice.All); releasing it
// otherwise does nothing.
func (b *Buckets) TryAcquire(key string) (sluice.Permit, error) {
	wait, w, ok, of := b.takeKey(key, clock.Nanos(), 0)
	if of {
		p, err := b.overflow.TryAcquire()
		b.t.count(err)
		return p, err
	}
	if !ok {
		why := b.reason(wait, sluice.ReasonRate)
		b.t.counters.Reject(why)
		return sluice.Permit{}, sluice.RejectQuota(why, max(wait, 0))
	}
	b.t.counters.Admit()
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
	limit, why := waitrule.Bound(now, waitrule.Deadline(ctx, clock.FromTime), b.maxWait)
	wait, w, ok, of := b.takeKey(key, now, limit)
	if of {
		p, err := b.overflow.Acquire(ctx)
		b.t.count(err)
		return p, err
	}
	if !ok {
		why = b.reason(wait, why)
		b.t.counters.Reject(why)
		return sluice.Permit{}, sluice.RejectQuota(why, max(wait, 0))
	}
	if wait > 0 {
		b.waiting.Add(1)
		err := waitrule.Sleep(ctx, wait)
		b.waiting.Add(-1)
		if err != nil {
			b.give(w)
			return sluice.Permit{}, err
		}
	}
	b.t.counters.Admit()
	return sluice.NewPermit((*releaser)(b), w), nil
}

// releaser keeps Release out of Buckets' method set.
type releaser Buckets

// Release does nothing: tokens spent on work that ran are spent.
func (r *releaser) Release(uint64, sluice.Outcome, time.Duration) {}

// Cancel refunds the tokens: the work never ran.
func (r *releaser) Cancel(w uint64) { (*Buckets)(r).give(w) }

// Tokens returns the tokens key has now (negative while callers wait for
// tokens not yet there), without storing key if it is new: the tokens of
// the bucket that would answer key's next request. That is the Overflow
// bucket's for a key not stored while MaxKeys keys are live (unless an
// idle key makes room first), and a full bucket for any other new key.
func (b *Buckets) Tokens(key string) float64 { return b.tokensAt(clock.Nanos(), key) }

// TokensAt is Tokens at time now.
func (b *Buckets) TokensAt(now time.Time, key string) float64 {
	return b.tokensAt(clock.FromTime(now), key)
}

func (b *Buckets) tokensAt(now int64, key string) float64 {
	tk, of := b.tokensNanos(key, now)
	if of {
		return b.overflow.TokensAt(clock.ToTime(now))
	}
	return tk
}

// Remaining returns what is left of key's quota now, for the IETF RateLimit
// field (httplimit.RatePolicy.Remaining): the whole tokens in the bucket
// that would answer key's next request (see Tokens), and the time until
// that bucket is full again at its rate (-1: never).
func (b *Buckets) Remaining(key string) (remaining int, reset time.Duration) {
	return b.remainingAt(clock.Nanos(), key)
}

// RemainingAt is Remaining at time now.
func (b *Buckets) RemainingAt(now time.Time, key string) (remaining int, reset time.Duration) {
	return b.remainingAt(clock.FromTime(now), key)
}

func (b *Buckets) remainingAt(now int64, key string) (int, time.Duration) {
	tk, of := b.tokensNanos(key, now)
	if of {
		return b.overflow.RemainingAt(clock.ToTime(now))
	}
	return b.p.Remaining(tk)
}

// tokensNanos returns key's tokens at now, or of when key is not stored
// and the table is full, so that its next request would go to the
// overflow bucket. It never moves a base: at a time too far from it, the
// tokens are computed there (gcra.TokensFar), exact at any distance.
func (b *Buckets) tokensNanos(key string, now int64) (tokens float64, of bool) {
	h := b.t.hash(key)
	s := b.t.shardOf(h)
	x := s.load()
	if i := x.find(h); i >= 0 {
		if e := x.slots[i].last.Load(); e != retired {
			if u, in := b.p.Units(now, x.base); in {
				return b.p.Tokens(e, u), false
			}
			return b.p.TokensFar(e, x.base, now), false
		}
	}
	// Not found (maybe only moving) or the index replaced: look again
	// under the lock, where no word is retired.
	s.mu.Lock()
	defer s.mu.Unlock()
	x = s.load()
	i := x.find(h)
	if i < 0 {
		return b.newKeyTokens() // evicted meanwhile
	}
	return b.p.TokensFar(x.slots[i].last.Load(), x.base, now), false
}

// newKeyTokens is tokensNanos for a key not stored: a full bucket, or the
// overflow's when no key can be added.
func (b *Buckets) newKeyTokens() (float64, bool) {
	if b.t.live.Load() >= b.t.maxKeys {
		return 0, true
	}
	return b.p.Tokens(b.p.Initial(), 0), false
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
// rate, Queued the callers waiting in Acquire for their key's bucket (those
// waiting in the overflow bucket are in Overflow().Stats().Queued, which
// takes its lock); admissions and rejections include the overflow bucket's.
func (b *Buckets) Stats() Stats {
	st := b.t.stats()
	st.Limit = b.rate
	st.Queued = int(b.waiting.Load())
	return st
}

// Overflow returns the bucket shared by the keys that did not fit.
func (b *Buckets) Overflow() *rate.Bucket { return b.overflow }
