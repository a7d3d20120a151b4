package redisstore

import (
	"cmp"
	"context"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/waitrule"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// Bounds of RateConfig.
const (
	MaxRate        = 1e7                 // tokens per second
	MaxBurst       = 1e7                 // tokens
	MaxRefill      = 30 * 24 * time.Hour // Burst/Rate: a key's longest TTL
	DefaultMaxKeys = 10000               // local maps: over-limit cache, batches, fallback
)

// RateConfig configures Buckets, a token bucket per key shared by every
// replica through a Store.
type RateConfig struct {
	// Prefix starts every key in Redis; the key itself follows in a hash
	// tag, "Prefix{key}", so that a key lives on one Cluster slot. Default
	// "sluice:rate:".
	Prefix string
	// Rate is the refill rate, tokens per second: more than 0, at most
	// MaxRate. Required.
	Rate float64
	// Burst is a bucket's capacity and the most one request may take: 1
	// to MaxBurst, with Burst/Rate (the time to refill, a key's TTL) at
	// most MaxRefill. Required.
	Burst int
	// MaxWait bounds how long Acquire waits for tokens (they are reserved
	// in Redis and the caller sleeps until they are due); 0: only the
	// context's deadline does.
	MaxWait time.Duration
	// Failure is what a decision does when Redis cannot answer in time.
	// Default FailOpen.
	Failure Failure
	// Replicas is the N of FailLocal's limit/N. 0: the store's heartbeat
	// count (Config.Heartbeat), 1 without one.
	Replicas int
	// OverLimitCache is the most keys remembered as over their limit until
	// their retry-after, answered without a round trip; when full, a new
	// key evicts the earliest-expiring of a few sampled entries (constant
	// time). 0: DefaultMaxKeys; -1: no cache.
	OverLimitCache int
	// Batch, if > 1, is the batched mode for hot keys: a round trip takes
	// up to Batch tokens and the replica spends them locally, for at most
	// Batch/Rate after taking them. Overshoot bound: over any interval W,
	// the replicas together admit at most Burst + Rate·W + R·Batch
	// (R replicas), against Burst + Rate·W without batching: each holds at
	// most Batch unspent tokens, every one of them granted by Redis.
	// 0 or 1: off. At most Burst.
	Batch int
	// MaxKeys caps the keys held in the process by the batched mode and
	// the FailLocal limiter. Default DefaultMaxKeys.
	MaxKeys int
}

// Buckets is a token bucket per key, in Redis: GCRA in one Lua script, one
// round trip per decision (pipelined with concurrent ones), on Redis's
// clock. Key returns one key's bucket as a sluice.Limiter; Buckets itself
// has the per-key methods of httplimit.Keyed. Safe for concurrent use.
type Buckets struct {
	s     *Store
	cfg   RateConfig
	t     any // µs per token, formatted once (a string)
	burst any // a string
	cache *overLimit
	res   *reservoirs
	hold  int64 // ns a batched token may stay unspent
	local localFor[*keyed.Map[*rate.Bucket]]
	c     counters
}

// NewBuckets returns per-key shared token buckets over s.
func NewBuckets(s *Store, cfg RateConfig) (*Buckets, error) {
	if s == nil {
		return nil, sluice.NewConfigError("redisstore", "store", nil, "must not be nil")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "sluice:rate:"
	}
	if err := checkKey("RateConfig.Prefix", cfg.Prefix); err != nil {
		return nil, err
	}
	if !(cfg.Rate > 0 && cfg.Rate <= MaxRate) {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.Rate", cfg.Rate, "must be > 0 and <= 1e7")
	}
	if cfg.Burst < 1 || cfg.Burst > MaxBurst {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.Burst", cfg.Burst, "must be between 1 and 1e7")
	}
	if refill := float64(cfg.Burst) / cfg.Rate; refill > MaxRefill.Seconds() {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.Burst", cfg.Burst, "Burst/Rate (the key TTL, time to refill) must be at most 720h")
	}
	if cfg.MaxWait < 0 {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.MaxWait", cfg.MaxWait, "must be >= 0")
	}
	if err := cfg.Failure.check(); err != nil {
		return nil, err
	}
	if cfg.Replicas < 0 || cfg.Replicas > 10000 {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.Replicas", cfg.Replicas, "must be between 0 and 10000")
	}
	if cfg.OverLimitCache < -1 || cfg.OverLimitCache > 1e7 {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.OverLimitCache", cfg.OverLimitCache, "must be -1 (off), 0 (default) or up to 1e7")
	}
	if cfg.Batch < 0 || cfg.Batch > cfg.Burst {
		return nil, sluice.NewConfigError("redisstore", "RateConfig.Batch", cfg.Batch, "must be between 0 and Burst")
	}
	if err := intField("RateConfig.MaxKeys", &cfg.MaxKeys, DefaultMaxKeys, 1, 1e7); err != nil {
		return nil, err
	}
	b := &Buckets{
		s:     s,
		cfg:   cfg,
		t:     strconv.FormatFloat(1e6/cfg.Rate, 'g', -1, 64), // the shortest exact form: less for Redis to read
		burst: strconv.Itoa(cfg.Burst),
	}
	b.cache = newOverLimit(cmp.Or(cfg.OverLimitCache, DefaultMaxKeys)) // -1: none
	if cfg.Batch > 1 {
		b.res = newReservoirs(cfg.MaxKeys)
		b.hold = int64(float64(cfg.Batch) / cfg.Rate * 1e9)
	}
	return b, nil
}

// Result is one decision of a shared bucket.
type Result struct {
	Allowed bool
	// Remaining is the tokens left in the bucket after the decision.
	Remaining int
	// RetryAfter (rejected) is when the tokens asked for will be there,
	// rounded up: a caller that waits that long is admitted, unless
	// another took them first.
	RetryAfter time.Duration
	// Delay (allowed) is how long the caller must wait before acting on
	// tokens reserved ahead (Acquire with a wait); 0 for TryAcquire.
	Delay time.Duration
	// Reset is when the bucket will be full again.
	Reset time.Duration
}

// Allow decides n tokens of key now, in one round trip. A store failure is
// returned as an error (ErrTimeout, ErrBreakerOpen, a Redis error): Allow
// does not apply the failure policy, TryAcquire and Acquire do. n over
// Burst is a *sluice.ConfigError naming n: no wait would admit it.
func (b *Buckets) Allow(key string, n int) (Result, error) {
	if err := b.checkN(key, n); err != nil {
		return Result{}, err
	}
	if n > b.cfg.Burst {
		return Result{}, sluice.NewConfigError("redisstore", "n", n, "must be at most RateConfig.Burst ("+strconv.Itoa(b.cfg.Burst)+"): a bucket never holds more")
	}
	r, err := b.eval(key, n, n, 0)
	if err != nil {
		return Result{}, err
	}
	return r.result(), nil
}

func (r gcraReply) result() Result {
	res := Result{Allowed: r.allowed, Remaining: int(r.remaining), Reset: time.Duration(r.resetUs) * time.Microsecond}
	if r.allowed {
		res.Delay = time.Duration(r.waitUs) * time.Microsecond
	} else {
		res.RetryAfter = time.Duration(r.waitUs) * time.Microsecond
	}
	return res
}

func (b *Buckets) checkN(key string, n int) error {
	if len(b.cfg.Prefix)+len(key)+2 > MaxKeyLen {
		return sluice.NewConfigError("redisstore", "key", len(key), "key length (with the prefix and braces) must be at most 1024 bytes (MaxKeyLen)")
	}
	if n < 1 {
		return sluice.NewConfigError("redisstore", "n", n, "must be >= 1")
	}
	return nil
}

func (b *Buckets) eval(key string, n, k int, maxWaitUs int64) (gcraReply, error) {
	c := getCall(gcraScript)
	c.keyBuf[0] = b.cfg.Prefix + "{" + key + "}"
	c.argBuf = [gcraArgs]any{b.t, b.burst, n, k, maxWaitUs}
	c.keys, c.args = c.keyBuf[:], c.argBuf[:]
	v, err := b.s.do(c)
	if err != nil {
		return gcraReply{}, err
	}
	return parseGCRA(v)
}

// TryAcquire takes one token of key now, or rejects with ReasonRate.
func (b *Buckets) TryAcquire(key string) (sluice.Permit, error) {
	return b.take(context.Background(), false, key, 1)
}

// Acquire takes one token of key, waiting for it up to MaxWait and the
// context's deadline: the token is reserved in Redis at once and the
// caller sleeps until it is due. A wait that cannot be met is rejected at
// once (ReasonDeadline, ReasonQueueTimeout); a context that ends during
// the sleep gives the token back and returns ctx.Err().
func (b *Buckets) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return b.take(ctx, true, key, 1)
}

// TakeN is TryAcquire for n tokens (weighted requests).
func (b *Buckets) TakeN(key string, n int) (sluice.Permit, error) {
	return b.take(context.Background(), false, key, n)
}

// AcquireN is Acquire for n tokens (weighted requests).
func (b *Buckets) AcquireN(ctx context.Context, key string, n int) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return b.take(ctx, true, key, n)
}

// take decides n tokens of key; wait says whether the caller may wait
// (Acquire) under ctx.
func (b *Buckets) take(ctx context.Context, wait bool, key string, n int) (sluice.Permit, error) {
	if err := b.checkN(key, n); err != nil {
		return sluice.Permit{}, err
	}
	if n > b.cfg.Burst {
		return sluice.Permit{}, b.c.reject(sluice.RejectQuota(sluice.ReasonTooLarge, 0))
	}
	// The longest wait allowed, and what a longer one is rejected as.
	maxWait, why := time.Duration(0), sluice.ReasonRate
	if wait {
		maxWait, why = time.Duration(math.MaxInt64), sluice.ReasonQueueTimeout
		if b.cfg.MaxWait > 0 {
			maxWait = b.cfg.MaxWait
		}
		if dl, ok := ctx.Deadline(); ok {
			if d := time.Until(dl); d < maxWait {
				maxWait, why = max(d, 0), sluice.ReasonDeadline
			}
		}
	}
	now := b.s.now()
	if u := b.cache.until(key, now); u != 0 && time.Duration(u-now) > maxWait {
		b.c.cacheHits.Add(1)
		// The cache knows when one token comes; n take n-1 intervals more.
		more := min(float64(n-1)/b.cfg.Rate*float64(time.Second), float64(math.MaxInt64/2))
		return sluice.Permit{}, b.c.reject(sluice.RejectQuota(why, time.Duration(u-now)+time.Duration(more)))
	}
	k := n
	if b.res != nil {
		if exp := b.res.take(key, int64(n), now); exp != 0 {
			b.c.local.Add(1)
			b.c.admit()
			return sluice.NewPermit(&grant{b: b, key: key, n: n, expires: exp}, 0), nil
		}
		k = max(n, b.cfg.Batch)
	}
	r, err := b.eval(key, n, k, min(int64(maxWait/time.Microsecond), maxMicros))
	if err != nil {
		return b.fail(ctx, wait, key, n, maxWait, why)
	}
	if !r.allowed {
		now = b.s.now()
		b.cache.put(key, now+r.retry1Us*1000, now)
		return sluice.Permit{}, b.c.reject(sluice.RejectQuota(why, time.Duration(r.waitUs)*time.Microsecond))
	}
	if b.res != nil && r.granted > int64(n) {
		now = b.s.now()
		b.res.add(key, r.granted-int64(n), int64(b.cfg.Batch), now+b.hold, now)
	}
	p := sluice.NewPermit(&grant{b: b, key: key, n: n}, 0)
	if r.waitUs > 0 && wait {
		if err := waitrule.Sleep(ctx, time.Duration(r.waitUs)*time.Microsecond); err != nil {
			p.Cancel()
			return sluice.Permit{}, err
		}
	}
	b.c.admit()
	return p, nil
}

// fail applies the failure policy to a decision the store could not make
// (the store counted why). maxWait and why are take's: the longest wait
// allowed and what a longer one is rejected as.
func (b *Buckets) fail(ctx context.Context, wait bool, key string, n int, maxWait time.Duration, why sluice.Reason) (sluice.Permit, error) {
	return b.c.fail(b.cfg.Failure, b.s.cfg.BreakerCooldown, func() (sluice.Permit, error) {
		m, err := b.local.get(b.buildLocal)
		if err != nil {
			return sluice.Permit{}, err
		}
		// The key's bucket (or the overflow's), used directly: Get has
		// just marked the key used, so it cannot be evicted meanwhile.
		bk, err := m.Get(key)
		if err == nil {
			err = b.fit(bk)
		}
		if err != nil {
			return sluice.Permit{}, err
		}
		switch {
		case wait && n == 1:
			return bk.Acquire(ctx)
		case n == 1:
			return bk.TryAcquire()
		}
		// n tokens as Redis would decide them: within the wait allowed,
		// a rejection saying when they come, a Cancel giving them back.
		r, ok := bk.Reserve(n, maxWait)
		if !ok {
			reason := r.Reason()
			switch {
			case reason == sluice.ReasonTooLarge:
				// More than this replica's share of the burst, which the
				// shared bucket holds (Allow refused n over Burst): a
				// rate limit for now, not a request that never fits.
				return sluice.Permit{}, sluice.RejectQuota(sluice.ReasonRate, 0)
			case reason == sluice.ReasonRate && r.Delay() >= 0:
				reason = why // they come, later than the wait allowed
			}
			return sluice.Permit{}, sluice.RejectQuota(reason, max(r.Delay(), 0))
		}
		if d := r.Delay(); d > 0 {
			if err := waitrule.Sleep(ctx, d); err != nil {
				r.Cancel()
				return sluice.Permit{}, err
			}
		}
		return sluice.NewPermit(&localGrant{r}, 0), nil
	})
}

// localGrant is the permit of FailLocal's weighted decision: Cancel gives
// its tokens back to the local bucket.
type localGrant struct{ r rate.Reservation }

func (g *localGrant) Release(uint64, sluice.Outcome, time.Duration) {}
func (g *localGrant) Cancel(uint64)                                 { g.r.Cancel() }

func (b *Buckets) replicas() int {
	if b.cfg.Replicas > 0 {
		return b.cfg.Replicas
	}
	return b.s.Replicas()
}

// localShare is FailLocal's bucket for n replicas: Rate/n and Burst/n
// (rounded up: at least one token).
func (b *Buckets) localShare(n int) rate.Config {
	return rate.Config{Rate: b.cfg.Rate / float64(n), Burst: (b.cfg.Burst + n - 1) / n, MaxWait: b.cfg.MaxWait}
}

// buildLocal makes FailLocal's limiter: a rate.Bucket per key at the local
// share, not a keyed.Buckets, whose rate and burst cannot change (see fit).
// A key idle for 2·Burst/Rate has refilled (for n <= Burst, ceil(Burst/n)
// tokens take less at Rate/n; beyond, the burst is one token, the most an
// early eviction gives), so evicting it then gives no free burst.
func (b *Buckets) buildLocal() (*keyed.Map[*rate.Bucket], error) {
	return keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) {
			return rate.NewBucket(b.localShare(b.replicas()))
		},
		MaxKeys:     b.cfg.MaxKeys,
		IdleTimeout: max(time.Minute, time.Duration(2*float64(b.cfg.Burst)/b.cfg.Rate*float64(time.Second))),
	})
}

// fit sets bk to the local share of the replicas live now, keeping its
// tokens (capped at the new burst): a new bucket would start full. Rate
// and burst change in one step, so no request sees half the change.
func (b *Buckets) fit(bk *rate.Bucket) error {
	want, c := b.localShare(b.replicas()), bk.Config()
	if want.Rate == c.Rate && want.Burst == c.Burst {
		return nil
	}
	return bk.SetLimits(want.Rate, want.Burst)
}

// Stats returns the decisions over every key; Limit is the rate.
func (b *Buckets) Stats() sluice.Stats { return b.c.stats(b.cfg.Rate, 0) }

// LimiterStats returns the counters beyond sluice.Stats.
func (b *Buckets) LimiterStats() LimiterStats { return b.c.limiterStats() }

// Key returns the bucket of one key as a sluice.Limiter (its Stats are
// the whole Buckets').
func (b *Buckets) Key(key string) *Bucket { return &Bucket{b: b, key: key} }

// Bucket is one key's shared bucket; see Buckets.Key.
type Bucket struct {
	b   *Buckets
	key string
}

func (k *Bucket) Acquire(ctx context.Context) (sluice.Permit, error) { return k.b.Acquire(ctx, k.key) }
func (k *Bucket) TryAcquire() (sluice.Permit, error)                 { return k.b.TryAcquire(k.key) }
func (k *Bucket) Stats() sluice.Stats                                { return k.b.Stats() }

// grant is an admitted request's permit: Release keeps the tokens, Cancel
// gives them back (to Redis, or to the local reservoir they came from).
type grant struct {
	b       *Buckets
	key     string
	n       int
	expires int64 // when the local tokens it spent expire; 0: from Redis
}

func (g *grant) Release(uint64, sluice.Outcome, time.Duration) {}

func (g *grant) Cancel(uint64) {
	b := g.b
	if g.expires != 0 {
		// Back with the expiry they had: a token given back does not
		// live longer than the batch Redis granted it in.
		now := b.s.now()
		b.res.add(g.key, int64(g.n), int64(b.cfg.Batch), g.expires, now)
		return
	}
	// Best effort: a refund that fails leaves the bucket a little emptier,
	// never fuller than it should be.
	_, _ = b.s.eval(refundScript, []string{b.cfg.Prefix + "{" + g.key + "}"}, b.t, g.n)
}
