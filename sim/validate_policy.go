package sim

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
)

// Each policy type checks its own fields; a field another kind has does not
// exist here, so there is nothing to refuse for it.

func (NonePolicy) validate(string) error { return nil }

func (p ConcurrencyPolicy) validate(f string) error {
	if p.Limit <= 0 {
		return bad(f+".limit", "must be > 0 for a concurrency policy, got %d", p.Limit)
	}
	if err := p.validateQueue(f); err != nil {
		return err
	}
	return checkCore(f, p.coreConfig(p.Limit))
}

func (p AdaptivePolicy) validate(f string) error {
	if _, ok := algorithms[p.algorithm()]; !ok {
		return bad(f+".algorithm", "unknown algorithm %q (%s)", p.Algorithm, algorithmNames())
	}
	if p.Limit < 0 || p.MinLimit < 0 || p.MaxLimit < 0 {
		return bad(f+".limit", "limits must be >= 0 (0: the algorithm's default)")
	}
	if p.MaxLimit > 0 && p.MinLimit > p.MaxLimit {
		return bad(f+".min_limit", "must be <= max_limit (%d), got %d", p.MaxLimit, p.MinLimit)
	}
	for _, name := range sortedAlgorithms() {
		if algorithms[name].configured(&p) && p.algorithm() != name {
			return bad(f+"."+string(name), "applies only with algorithm %s", name)
		}
	}
	alg, err := newAlgorithm(&p)
	if err != nil {
		return bad(f+"."+string(p.algorithm()), "%v", err)
	}
	if err := p.validateQueue(f); err != nil {
		return err
	}
	cfg := p.coreConfig(p.Limit)
	cfg.Algorithm = alg
	return checkCore(f, cfg)
}

func (p TokenBucketPolicy) validate(f string) error {
	if err := checkRate(f, p.Rate, p.Burst); err != nil {
		return err
	}
	// What rate.NewBucket refuses beyond that (a burst it cannot count at
	// the rate), so that Run cannot fail on a scenario Validate passed.
	if err := rate.ValidFill(p.Rate, max(p.Burst, 1)); err != nil {
		return bad(f+".burst", "%v", err)
	}
	return checkDuration(f+".max_wait", p.MaxWait)
}

func (p TickerPolicy) validate(f string) error {
	if err := checkRate(f, p.Rate, p.Burst); err != nil {
		return err
	}
	if p.Queue < Unbounded {
		return bad(f+".queue", "must be >= 0, or -1 for unbounded, got %d", p.Queue)
	}
	return checkDuration(f+".max_wait", p.MaxWait)
}

func checkRate(f string, rate float64, burst int) error {
	if !(rate > 0 && rate <= maxRate) { // NaN too
		return bad(f+".rate", "must be in (0, %g] per second, got %v", float64(maxRate), rate)
	}
	if burst < 0 {
		return bad(f+".burst", "must be >= 0 (0: 1), got %d", burst)
	}
	return nil
}

// checkCore reports what the decision code itself refuses (a limit past
// its bounds), so that Run cannot fail on a scenario Validate passed.
func checkCore(f string, cfg concurrency.Config) error {
	if _, err := concurrency.NewCore(cfg); err != nil {
		return bad(f, "%v", err)
	}
	return nil
}

// validateQueue checks the queue's fields; f is its policy's path (the
// queue's keys sit beside the policy's own in a file).
func (q QueueConfig) validateQueue(f string) error {
	if q.Queue < Unbounded {
		return bad(f+".queue", "must be >= 0, or -1 for unbounded, got %d", q.Queue)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"max_wait", q.MaxWait}, {"codel_target", q.CoDelTarget}, {"codel_interval", q.CoDelInterval}} {
		if err := checkDuration(f+"."+d.key, d.v); err != nil {
			return err
		}
	}
	if !(q.MaxWaitServices >= 0) || math.IsInf(q.MaxWaitServices, 1) {
		return bad(f+".max_wait_services", "must be a finite number >= 0 (0: none), got %v", q.MaxWaitServices)
	}
	if _, err := q.Discipline.MarshalText(); err != nil {
		return bad(f+".discipline", "unknown discipline %d (fifo, lifo, codel, adaptive_lifo)", q.Discipline)
	}
	if (q.CoDelTarget != 0 || q.CoDelInterval != 0) && q.Discipline != concurrency.CoDel && q.Discipline != concurrency.AdaptiveLIFO {
		return bad(f+".codel_target", "applies only to the codel and adaptive_lifo disciplines")
	}
	return nil
}

// coreConfig is the concurrency.Config of the queue in front of limit.
func (q QueueConfig) coreConfig(limit int) concurrency.Config {
	cfg := concurrency.Config{
		Limit:           limit,
		MaxQueue:        q.Queue,
		MaxWait:         q.MaxWait,
		MaxWaitServices: q.MaxWaitServices,
		Discipline:      q.Discipline,
		CoDelTarget:     q.CoDelTarget,
		CoDelInterval:   q.CoDelInterval,
	}
	if q.Queue == Unbounded {
		cfg.MaxQueue = concurrency.MaxLimit
	}
	return cfg
}
