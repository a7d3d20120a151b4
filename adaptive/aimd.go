package adaptive

import (
	"cmp"
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
//     limit in flight): +Increase, at most once per Interval. A limit that
//     is not in use does not grow: after a lull it would otherwise be
//     arbitrarily large and admit a burst the service cannot take.
//   - Overload signal (Dropped, or latency > Timeout): limit × Backoff,
//     once. Further signals are ignored until Interval has passed AND they
//     come from requests that started after the backoff: requests admitted
//     under the old limit fail together, and counting each of them would
//     collapse the limit to MinLimit after one burst.
//   - Otherwise (healthy but idle): unchanged.
//
// AIMD needs no latency model, so it suits services whose latency says
// little about their load, but it only learns from failures: it keeps
// probing upward until something fails.
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
}

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
	overload := s.Outcome == sluice.Dropped || (a.timeout > 0 && s.Latency > a.timeout)
	switch {
	case overload:
		started := now.Add(-s.Latency)
		if !a.lastBackoff.IsZero() && (now.Sub(a.lastBackoff) < a.interval || !started.After(a.lastBackoff)) {
			break // this request saw the old limit; the backoff already answered it
		}
		a.limit = a.bounds.clamp(a.limit * a.backoff)
		a.lastBackoff, a.lastChange = now, now
	case float64(s.InFlight)*2 >= a.limit && (a.lastChange.IsZero() || now.Sub(a.lastChange) >= a.interval):
		a.limit = a.bounds.clamp(a.limit + a.increase)
		a.lastChange = now
	}
	return int(a.limit)
}
