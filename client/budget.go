package client

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// RetryBudgetConfig configures a RetryBudget. The zero value allows retries
// up to 10% of requests over 10 seconds, plus one retry per second.
type RetryBudgetConfig struct {
	// Ratio is the fraction of requests that may be retried over the
	// window: retries add at most this much load. Default 0.1, the SRE
	// book's figure. Must be in (0, 10].
	Ratio float64
	// MinPerSecond is a floor of retries per second allowed whatever the
	// traffic, so that a client sending a few requests can still retry one.
	// Default 1; a negative value means no floor.
	MinPerSecond float64
	// Window is how far back requests and retries are counted. Default 10 s.
	Window time.Duration
	// Buckets is how many slices the window slides by. Default 10, at
	// most 4096.
	Buckets int
}

func (c *RetryBudgetConfig) fill() error {
	if c.Ratio == 0 {
		c.Ratio = 0.1
	}
	switch {
	case c.MinPerSecond == 0:
		c.MinPerSecond = 1
	case c.MinPerSecond < 0:
		c.MinPerSecond = 0
	}
	if c.Window == 0 {
		c.Window = 10 * time.Second
	}
	if c.Buckets == 0 {
		c.Buckets = 10
	}
	switch {
	case !(c.Ratio > 0 && c.Ratio <= 10):
		return invalid("RetryBudgetConfig.Ratio", c.Ratio, "must be in (0, 10]")
	case math.IsNaN(c.MinPerSecond) || math.IsInf(c.MinPerSecond, 0):
		return invalid("RetryBudgetConfig.MinPerSecond", c.MinPerSecond, "must be finite")
	case c.Buckets < 1 || c.Buckets > maxBuckets:
		return invalid("RetryBudgetConfig.Buckets", c.Buckets, "must be in [1, "+strconv.Itoa(maxBuckets)+"]")
	case c.Window < time.Duration(c.Buckets):
		return invalid("RetryBudgetConfig.Window", c.Window, "must be positive and at least Buckets nanoseconds")
	}
	return nil
}

// RetryBudget caps retries at a fraction of requests over a sliding window,
// so that retries cannot multiply the load on a backend that is already
// overloaded: without a budget, three attempts per request turn an overload
// into nearly three times the load; with a 10% budget, into 1.1 times.
//
// Count every original request with Request (not the retries), and ask
// TryRetry before each retry. A retry is allowed when, counting it,
//
//	retries ≤ Ratio·requests + MinPerSecond·Window
//
// Share one budget among all the clients of one backend. Make it with
// NewRetryBudget: the zero value is not usable. Safe for concurrent use.
// The ...At forms take the time as an argument.
type RetryBudget struct {
	ratio, floor float64 // floor = MinPerSecond × window in seconds

	mu sync.Mutex
	w  window // a: requests, b: retries
}

// NewRetryBudget returns a RetryBudget, or a *sluice.ConfigError
// that names the bad field.
func NewRetryBudget(cfg RetryBudgetConfig) (*RetryBudget, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return &RetryBudget{
		ratio: cfg.Ratio,
		floor: cfg.MinPerSecond * cfg.Window.Seconds(),
		w:     newWindow(int64(cfg.Window), cfg.Buckets),
	}, nil
}

// Request counts one original request.
func (b *RetryBudget) Request() { b.requestAt(clock.Nanos()) }

// RequestAt counts one original request at time now.
func (b *RetryBudget) RequestAt(now time.Time) { b.requestAt(clock.FromTime(now)) }

func (b *RetryBudget) requestAt(now int64) {
	b.mu.Lock()
	b.w.add(now, 1, 0)
	b.mu.Unlock()
}

// TryRetry reports whether a retry is allowed now, and if so counts it.
func (b *RetryBudget) TryRetry() bool { return b.tryRetryAt(clock.Nanos()) }

// TryRetryAt is TryRetry at time now.
func (b *RetryBudget) TryRetryAt(now time.Time) bool { return b.tryRetryAt(clock.FromTime(now)) }

func (b *RetryBudget) tryRetryAt(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	req, ret := b.w.totals(now)
	if float64(ret+1) > b.ratio*float64(req)+b.floor {
		return false
	}
	b.w.add(now, 0, 1)
	return true
}

// refundAt takes back a retry that TryRetry counted at time at and that was
// never sent (its caller left during the wait, or the Transport's limiter
// rejected it): a retry that adds no load must not stop another that would
// be allowed. A retry counted so long
// ago that it left the window has expired anyway, and is dropped.
func (b *RetryBudget) refundAt(at int64) {
	b.mu.Lock()
	b.w.add(at, 0, -1)
	b.mu.Unlock()
}
