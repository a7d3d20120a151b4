package adaptive

import (
	"cmp"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// AIMDConfig configures an AIMD limit. The zero value is a valid config:
// every zero field takes the default written next to it.
type AIMDConfig struct {
	// InitialLimit is the limit before the first sample. Default 20 (or
	// MinLimit / MaxLimit if 20 falls outside them).
	InitialLimit int
	// MinLimit is the floor of the limit. Default 1.
	MinLimit int
	// MaxLimit is the ceiling of the limit. Default 1000, or MinLimit if
	// that is higher.
	MaxLimit int

	// Increase is added to the limit at most once per Interval while the
	// service is healthy and the limit is in use. Default 1.
	Increase int
	// Interval is the least time between two increases, between two
	// backoffs, and from a backoff to the next increase. Default 1s
	// (seed 003: "+1 per second").
	Interval time.Duration
	// Backoff multiplies the limit on an overload signal; it must be in
	// (0, 1). Default 0.75 (seed 003: "back off to 75%").
	Backoff float64
	// Timeout, when positive, makes a Success slower than it an overload
	// signal, like a Dropped. Default 0: latency alone never backs off.
	Timeout time.Duration
}

// AIMD is the loss-based limit of TCP congestion control, as Jon Moore ran
// it at a proxy (seed 003): add Increase per Interval while requests succeed,
// multiply by Backoff when one is Dropped (or slower than Timeout).
//
// Regimes:
//
//   - Healthy and used (a Success that started with at least half the
//     limit in flight): +Increase, at most once per Interval, and only on
//     a Success that started after the last change: the evidence for a
//     step must come from the step before it, one observed round trip at
//     least (TCP adds one segment per round trip, not per clock tick; a
//     step per second against a 2 s round trip stacks two steps before the
//     first is judged). A limit that is not in use does not grow: after a
//     lull it would otherwise be arbitrarily large and admit a burst the
//     service cannot take.
//   - Overload signal (Dropped, or latency > Timeout): limit × Backoff,
//     and at least one permit fewer (see below), once. Further signals are
//     ignored until Interval has passed AND they come from requests that
//     started after the backoff: requests admitted under the old limit
//     fail together, and counting each of them would collapse the limit to
//     MinLimit after one burst.
//   - Otherwise (healthy but idle): unchanged.
//
// Small limits. The limit is kept as a float and floored for admission, so
// fractional steps accumulate. Two rules keep a limit of a few permits (a
// service with 7 workers and a 2 s request, seed 003) from sawing far
// below or creeping above the level that fails:
//
//   - A backoff takes at least one permit away: 8.4 × 0.9 = 7.56 would
//     still admit 7, then 8.56 admits 8 again, and the float creeps up by
//     a fraction per cycle until the backoff no longer leaves the failing
//     level (×0.9 holds nothing below 10).
//   - Probing the level that failed backs off exponentially. The level at
//     the last backoff is remembered; a step back up to it waits Interval
//     × 2^k, where k counts the backoffs in a row at that level or below
//     after the first (1, 2, 4, 8, then at most 16 Intervals). A service
//     whose capacity sits between two integers (7 workers busy and one
//     request that must queue behind them, too late for its client)
//     otherwise spends every other interval at the failing level and
//     loses requests each time. Once
//     there, the level must hold as long again before the limit grows
//     past it and the memory is cleared: a failure is reported a round
//     trip or a client timeout after it happened, and a success that
//     arrives first says little. A success in less than half the time the
//     failing request took also clears the memory: the slow release was
//     rolled back, and the service is not the one that failed. This is
//     CUBIC's idea (dwell
//     near the last failure point, probe past it cautiously) in AIMD form.
//
// AIMD needs no latency model, so it suits services whose latency says
// little about their load, but it only learns from failures: it keeps
// probing upward until something fails. Below the failing level it holds
// about Backoff × that level after each failure; with a queue in front of
// the limit (concurrency.Config.MaxQueue), the level below the failing one
// is the service's capacity and keeps it busy. With 7 workers it dwells at
// 7 rather than sawing 6–9 (seed 003: 99% of the slowed origin's capacity
// with a one-slot queue in front of the limit; 87–91% with Poisson
// arrivals, where no limit reaches 95%).
//
// An AIMD is not safe for concurrent use (see Algorithm).
type AIMD struct {
	limit    float64
	bounds   bounds
	increase float64
	interval time.Duration
	backoff  float64
	timeout  time.Duration

	lastChange  time.Time // last increase or backoff; zero before the first
	lastBackoff time.Time // zero before the first backoff

	// failedAt is the (integer) limit at the last backoff, 0 once a round
	// trip held at it; failures counts the backoffs in a row at or below
	// it after the first.
	failedAt  float64
	failures  int
	failedLat time.Duration // the latency of the request that failed there
}

// maxProbeDoublings caps the wait before probing a level that keeps
// failing at 2^4 = 16 Intervals, so that a capacity that grew is found
// within a bounded time.
const maxProbeDoublings = 4

// NewAIMD returns an AIMD limit, or an error naming the invalid field.
func NewAIMD(cfg AIMDConfig) (*AIMD, error) {
	const typ = "AIMDConfig"
	initial, b, err := resolveBounds(typ, cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)
	if err != nil {
		return nil, err
	}
	if cfg.Increase < 0 {
		return nil, invalid(typ, "Increase", cfg.Increase, ">= 0 (0 means the default)")
	}
	if err := checkNonNegative(typ, "Interval", cfg.Interval); err != nil {
		return nil, err
	}
	if err := checkNonNegative(typ, "Timeout", cfg.Timeout); err != nil {
		return nil, err
	}
	if cfg.Backoff < 0 || cfg.Backoff >= 1 || cfg.Backoff != cfg.Backoff {
		return nil, invalid(typ, "Backoff", cfg.Backoff, "within (0, 1) (0 means the default)")
	}
	a := &AIMD{
		limit:    initial,
		bounds:   b,
		increase: float64(cmp.Or(cfg.Increase, 1)),
		interval: cmp.Or(cfg.Interval, time.Second),
		backoff:  cmp.Or(cfg.Backoff, 0.75),
		timeout:  cfg.Timeout,
	}
	return a, nil
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return int(a.limit) }

// Observe feeds one sample taken at now and returns the new limit.
func (a *AIMD) Observe(now time.Time, s Sample) int {
	if !learnable(s) {
		return int(a.limit)
	}
	started := now.Add(-s.Latency)
	overload := s.Outcome == sluice.Dropped || (a.timeout > 0 && s.Latency > a.timeout)
	if !overload && a.failedAt > 0 && 2*s.Latency < a.failedLat {
		a.failedAt, a.failures = 0, 0 // the service is not the one that failed
	}
	switch {
	case overload:
		if !a.lastBackoff.IsZero() && (now.Sub(a.lastBackoff) < a.interval || !started.After(a.lastBackoff)) {
			break // this request saw the old limit; the backoff already answered it
		}
		level := math.Floor(a.limit)
		if a.failedAt > 0 && level <= a.failedAt {
			a.failures++
		} else {
			a.failures = 0
		}
		a.failedAt, a.failedLat = level, s.Latency
		a.limit = a.bounds.clamp(min(a.limit*a.backoff, level-1))
		a.lastBackoff, a.lastChange = now, now
	case float64(s.InFlight)*2 >= a.limit && (a.lastChange.IsZero() || (started.After(a.lastChange) && now.Sub(a.lastChange) >= a.wait())):
		if a.failedAt > 0 && math.Floor(a.limit) >= a.failedAt {
			a.failedAt, a.failures = 0, 0 // a round trip held at the level that failed
		}
		a.limit = a.bounds.clamp(a.limit + a.increase)
		a.lastChange = now
	}
	return int(a.limit)
}

// wait is the time from the last change to the next increase: Interval,
// or Interval × 2^failures if the increase would reach the level that
// failed last, or go on from it (see the type's doc). The product
// saturates at the longest Duration: a shift of an Interval of 2^59 ns
// (18 years) or more wrapped negative, and the next Success increased
// the limit at once.
func (a *AIMD) wait() time.Duration {
	if a.failedAt > 0 && math.Floor(a.limit+a.increase) >= a.failedAt {
		k := min(a.failures, maxProbeDoublings)
		if a.interval > math.MaxInt64>>k {
			return math.MaxInt64
		}
		return a.interval << k
	}
	return a.interval
}
