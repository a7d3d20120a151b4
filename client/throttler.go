package client

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/counter"
)

// ThrottlerConfig configures a Throttler. The zero value is the SRE book's
// recommendation: K = 2 over a two-minute window.
type ThrottlerConfig struct {
	// K is how many requests the client may send per request the backend
	// accepts before it starts rejecting locally. Default 2. Must be >= 1.
	// Lower values waste less of the backend on rejections but leave some of
	// its capacity idle and notice its recovery later: at K = 1.1 the backend
	// sees about one rejection per ten accepts, and in the package's
	// simulation served about 86% of what it could.
	K float64
	// Window is how far back requests and accepts are counted. Default 2
	// minutes.
	Window time.Duration
	// Buckets is how many slices the window is kept in; the window slides
	// one slice at a time. Default 120. At most 4096.
	Buckets int
	// MaxRejectProbability caps the local rejection probability so that some
	// requests always reach the backend and notice its recovery. Default 1:
	// only the formula's own bound, requests/(requests+1), applies.
	MaxRejectProbability float64
	// Random returns a uniform number in [0, 1) for the rejection draw. It
	// must be safe for concurrent use. Default math/rand/v2.Float64; tests
	// and the simulator pass a seeded source.
	Random func() float64
}

const maxBuckets = 4096

func (c *ThrottlerConfig) fill() error {
	if c.K == 0 {
		c.K = 2
	}
	if c.Window == 0 {
		c.Window = 2 * time.Minute
	}
	if c.Buckets == 0 {
		c.Buckets = 120
	}
	if c.MaxRejectProbability == 0 {
		c.MaxRejectProbability = 1
	}
	if c.Random == nil {
		c.Random = rand.Float64
	}
	switch {
	case !(c.K >= 1) || math.IsInf(c.K, 0):
		return invalid("ThrottlerConfig.K", c.K, "must be a finite number >= 1")
	case c.Buckets < 0 || c.Buckets > maxBuckets:
		return invalid("ThrottlerConfig.Buckets", c.Buckets, "must be in [1, "+strconv.Itoa(maxBuckets)+"]")
	case c.Window < time.Duration(c.Buckets):
		return invalid("ThrottlerConfig.Window", c.Window, "must be positive and at least Buckets nanoseconds")
	case !(c.MaxRejectProbability > 0 && c.MaxRejectProbability <= 1):
		return invalid("ThrottlerConfig.MaxRejectProbability", c.MaxRejectProbability, "must be in (0, 1]")
	}
	return nil
}

// Throttler is client-side adaptive throttling from the Google SRE book
// ("Handling Overload"). It counts, over a sliding window, the requests the
// application attempted (including those it rejected locally) and the ones
// the backend accepted, and rejects a new request locally with probability
//
//	P = max(0, (requests − K·accepts) / (requests + 1))
//
// While the backend accepts everything, P is 0. When it rejects, the client
// settles where it sends about K·accepts requests, so at K = 2 a backend in
// heavy overload sees about one rejection per request it serves, and the
// rejections cost the client nothing but a random draw.
//
// Throttler is a sluice.Limiter: TryAcquire and Acquire never wait and reject
// with sluice.ReasonThrottled. Release the permit with sluice.Success or
// sluice.Ignore when the backend accepted the request (any answer that is not
// an overload signal), with sluice.Dropped when it rejected it (429, 503, a
// timeout); Cancel when the request was never sent. The accept is counted
// at the permit's acquire time plus the latency passed to Release.
//
// It works poorly for clients that send rarely: the window then holds too few
// requests to tell overload from bad luck. Safe for concurrent use.
type Throttler struct {
	k, maxP float64
	random  func() float64

	mu sync.Mutex
	w  window // a: requests, b: accepts

	inFlight atomic.Int64
	counters counter.Counters
}

// errThrottled is shared by every local rejection so that rejecting, the
// path that runs most under overload, does not allocate.
var errThrottled = sluice.Reject(sluice.ReasonThrottled, 0)

// NewThrottler returns a Throttler, or a *sluice.ConfigError that
// names the bad field.
func NewThrottler(cfg ThrottlerConfig) (*Throttler, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return &Throttler{
		k:      cfg.K,
		maxP:   cfg.MaxRejectProbability,
		random: cfg.Random,
		w:      newWindow(int64(cfg.Window), cfg.Buckets),
	}, nil
}

// RejectProbability is the SRE formula max(0, (requests − k·accepts) /
// (requests + 1)), capped at maxP.
func RejectProbability(requests, accepts, k, maxP float64) float64 {
	p := (requests - k*accepts) / (requests + 1)
	return min(max(p, 0), maxP)
}

// TryAcquire decides now whether to send a request.
func (t *Throttler) TryAcquire() (sluice.Permit, error) { return t.tryAcquireAt(clock.Nanos()) }

// Acquire is TryAcquire unless ctx is already done: the throttler never
// waits, so a rejected caller decides itself whether to fail or fall back.
func (t *Throttler) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return t.tryAcquireAt(clock.Nanos())
}

// TryAcquireAt is TryAcquire at time now, for the simulator and for tests.
func (t *Throttler) TryAcquireAt(now time.Time) (sluice.Permit, error) {
	return t.tryAcquireAt(clock.FromTime(now))
}

func (t *Throttler) tryAcquireAt(now int64) (sluice.Permit, error) {
	t.mu.Lock()
	req, acc := t.w.totals(now)
	t.w.add(now, 1, 0) // a locally rejected request still counts: that is what bounds P below 1
	t.mu.Unlock()
	if p := RejectProbability(float64(req), float64(acc), t.k, t.maxP); p > 0 && t.random() < p {
		t.counters.Reject(sluice.ReasonThrottled)
		return sluice.Permit{}, errThrottled
	}
	t.counters.Admit()
	t.inFlight.Add(1)
	return sluice.NewPermit((*releaser)(t), uint64(now)), nil
}

// releaser is the Throttler as seen by its permits: a distinct type keeps
// Release out of Throttler's method set, so that only a Permit, which
// releases once, can call it.
type releaser Throttler

// Release implements sluice.Releaser. token is the acquire time.
func (r *releaser) Release(token uint64, o sluice.Outcome, latency time.Duration) {
	t := (*Throttler)(r)
	t.inFlight.Add(-1)
	at := int64(token)
	t.mu.Lock()
	if o != sluice.Dropped {
		t.w.add(at+int64(max(latency, 0)), 0, 1)
	}
	t.mu.Unlock()
}

// Cancel implements sluice.Releaser: a request never sent was not a
// request after all.
func (r *releaser) Cancel(token uint64) {
	t := (*Throttler)(r)
	t.inFlight.Add(-1)
	t.mu.Lock()
	t.w.add(int64(token), -1, 0)
	t.mu.Unlock()
}

// RejectProbabilityAt returns the probability that a request at time now
// would be rejected locally.
func (t *Throttler) RejectProbabilityAt(now time.Time) float64 {
	t.mu.Lock()
	req, acc := t.w.totals(clock.FromTime(now))
	t.mu.Unlock()
	return RejectProbability(float64(req), float64(acc), t.k, t.maxP)
}

// Stats reports permits in flight, admissions and local rejections (under
// sluice.ReasonThrottled). Limit is 0: the throttler has no limit in requests,
// only a probability; read it with RejectProbabilityAt.
func (t *Throttler) Stats() sluice.Stats {
	s := sluice.Stats{InFlight: int(t.inFlight.Load())}
	t.counters.Fill(&s)
	return s
}
