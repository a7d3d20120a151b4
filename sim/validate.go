package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
)

// ErrInvalid is matched (errors.Is) by every scenario validation error.
var ErrInvalid = errors.New("sim: invalid scenario")

// FieldError says which scenario field is wrong and why. Field is the path
// as written in a scenario file, e.g. "origin.workers" or
// "policies[1].discipline".
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return "sim: " + e.Field + ": " + e.Problem }

// Unwrap makes a FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func bad(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks the scenario and returns the first problem found, as a
// *FieldError naming the field: a bad value, a config the decision code
// refuses, or a run too large to finish in seconds (more than 100,000
// points or 10 million requests per policy). Run calls it.
func (s *Scenario) Validate() error {
	if s.Duration <= 0 {
		return bad("duration", "must be > 0, got %v", s.Duration)
	}
	if s.Duration > maxDuration {
		return bad("duration", "must be at most %v, got %v", maxDuration, s.Duration)
	}
	if s.Interval < 0 {
		return bad("interval", "must be >= 0 (0: 1s), got %v", s.Interval)
	}
	// Rates are counts over a window: one shorter than an interval would
	// make a rate of a few requests in a nanosecond (1e9 per second).
	interval := cmp.Or(s.Interval, time.Second)
	if s.Interval > s.Duration {
		return bad("interval", "must be <= duration (%v), got %v", s.Duration, s.Interval)
	}
	if s.Duration < interval {
		return bad("duration", "must be at least one interval (%v), got %v", interval, s.Duration)
	}
	if s.Warmup < 0 || s.Warmup > s.Duration-interval {
		return bad("warmup", "must be in [0, duration - interval] (%v): the summary needs at least one interval, got %v", s.Duration-interval, s.Warmup)
	}
	if err := s.Origin.validate(); err != nil {
		return err
	}
	if err := s.Load.validate(); err != nil {
		return err
	}
	if len(s.Policies) == 0 {
		return bad("policies", "at least one policy is required")
	}
	for i, p := range s.Policies {
		f := fmt.Sprintf("policies[%d]", i)
		// A nil pointer to a policy type is a Policy (its value methods
		// are promoted) that would panic when called.
		if v := reflect.ValueOf(p); p == nil || v.Kind() == reflect.Pointer && v.IsNil() {
			return bad(f+".kind", "is required (%s)", kindNames())
		}
		if err := p.validate(f); err != nil {
			return err
		}
	}
	return s.checkSize()
}

func (o *Origin) validate() error {
	if o.Workers <= 0 {
		return bad("origin.workers", "must be > 0, got %d", o.Workers)
	}
	if o.Queue < Unbounded {
		return bad("origin.queue", "must be >= 0, or -1 for unbounded, got %d", o.Queue)
	}
	if err := checkDuration("origin.timeout", o.Timeout); err != nil {
		return err
	}
	if err := o.Service.validate("origin.service"); err != nil {
		return err
	}
	var last time.Duration
	for i, c := range o.Changes {
		f := fmt.Sprintf("origin.changes[%d]", i)
		if c.At < 0 {
			return bad(f+".at", "must be >= 0, got %v", c.At)
		}
		if c.At < last {
			return bad(f+".at", "changes must be in time order, got %v after %v", c.At, last)
		}
		last = c.At
		if c.Workers < 0 {
			return bad(f+".workers", "must be >= 0 (0: unchanged), got %d", c.Workers)
		}
		if c.Service.Kind != "" {
			if err := c.Service.validate(f + ".service"); err != nil {
				return err
			}
		} else if c.Service != (Dist{}) {
			return bad(f+".service.kind", "is required when the service changes")
		}
		if c.Workers == 0 && c.Service.Kind == "" {
			return bad(f, "changes nothing: set workers or service")
		}
	}
	return nil
}

func (d *Dist) validate(f string) error {
	switch d.Kind {
	case Constant, Exponential, Lognormal, Bimodal:
	case "":
		return bad(f+".kind", "is required (constant, exponential, lognormal, bimodal)")
	default:
		return bad(f+".kind", "unknown distribution %q (constant, exponential, lognormal, bimodal)", d.Kind)
	}
	if d.Mean <= 0 {
		return bad(f+".mean", "must be > 0, got %v", d.Mean)
	}
	if d.Mean > maxDuration {
		return bad(f+".mean", "must be at most %v, got %v", maxDuration, d.Mean)
	}
	if d.Sigma < 0 || math.IsNaN(d.Sigma) || d.Sigma > MaxSigma {
		return bad(f+".sigma", "must be in [0, %v] (0: 1), got %v", MaxSigma, d.Sigma)
	}
	if d.Sigma != 0 && d.Kind != Lognormal {
		return bad(f+".sigma", "applies only to lognormal")
	}
	if d.Kind == Bimodal {
		if d.Tail <= 0 || d.Tail > maxDuration {
			return bad(f+".tail", "must be in (0, %v] for bimodal, got %v", maxDuration, d.Tail)
		}
		if !(d.TailFraction >= 0 && d.TailFraction <= 1) {
			return bad(f+".tail_fraction", "must be in [0, 1], got %v", d.TailFraction)
		}
	} else if d.Tail != 0 {
		return bad(f+".tail", "applies only to bimodal")
	} else if d.TailFraction != 0 {
		return bad(f+".tail_fraction", "applies only to bimodal")
	}
	return nil
}

// maxRate keeps a typo from asking for a run that never ends.
const maxRate = 1e8

func validRate(r float64) bool { return r >= 0 && r <= maxRate && !math.IsNaN(r) }

func (l *Load) validate() error {
	switch l.Arrivals {
	case "", ConstantArrivals, PoissonArrivals:
	default:
		return bad("load.arrivals", "unknown arrival process %q (constant, poisson)", l.Arrivals)
	}
	if !validRate(l.Rate) {
		return bad("load.rate", "must be in [0, %g] requests per second, got %v", float64(maxRate), l.Rate)
	}
	var last time.Duration
	for i, st := range l.Steps {
		f := fmt.Sprintf("load.steps[%d]", i)
		if st.At <= last {
			return bad(f+".at", "steps must be after 0 and in increasing time order, got %v", st.At)
		}
		last = st.At
		if !validRate(st.Rate) {
			return bad(f+".rate", "must be in [0, %g] requests per second, got %v", float64(maxRate), st.Rate)
		}
	}
	if l.Ramp && len(l.Steps) == 0 {
		return bad("load.ramp", "needs at least one step to ramp to")
	}
	b := l.Bursts
	if b.Size < 0 || b.Size > maxRate {
		return bad("load.bursts.size", "must be in [0, %g], got %d", float64(maxRate), b.Size)
	}
	if b.Size > 0 {
		if b.Count <= 0 {
			return bad("load.bursts.count", "must be > 0 with bursts, got %d", b.Count)
		}
		if b.Count > 1 && b.Every <= 0 {
			return bad("load.bursts.every", "must be > 0 with more than one burst, got %v", b.Every)
		}
		if err := checkDuration("load.bursts.every", b.Every); err != nil {
			return err
		}
		if b.At < 0 {
			return bad("load.bursts.at", "must be >= 0, got %v", b.At)
		}
	} else if b != (Bursts{}) {
		return bad("load.bursts.size", "must be > 0 when bursts are configured")
	}
	if l.Rate == 0 && b.Size == 0 && len(l.Steps) == 0 {
		return bad("load.rate", "no load: set rate, steps or bursts")
	}
	if err := checkDuration("load.timeout", l.Timeout); err != nil {
		return err
	}
	if l.ClientWorkers < 0 {
		return bad("load.client_workers", "must be >= 0 (0: no cap), got %d", l.ClientWorkers)
	}
	r := l.Retries
	if r.Max < 0 || r.Max > 100 {
		return bad("load.retries.max", "must be in [0, 100], got %d", r.Max)
	}
	if r.Budget < 0 || math.IsNaN(r.Budget) || r.Budget > 100 {
		return bad("load.retries.budget", "must be in [0, 100] retries per request, got %v", r.Budget)
	}
	if err := checkDuration("load.retries.backoff", r.Backoff); err != nil {
		return err
	}
	return nil
}
