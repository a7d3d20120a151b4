package sim

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
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
	for _, l := range []struct {
		key string
		v   int
	}{{"limit", p.Limit}, {"min_limit", p.MinLimit}, {"max_limit", p.MaxLimit}} {
		if l.v < 0 {
			return bad(f+"."+l.key, "must be >= 0 (0: the algorithm's default), got %d", l.v)
		}
	}
	// The concurrency core takes the initial limit, at least min_limit,
	// up to concurrency.MaxLimit; max_limit is only a ceiling.
	if p.Limit > concurrency.MaxLimit {
		return bad(f+".limit", "must be at most %d, got %d", concurrency.MaxLimit, p.Limit)
	}
	if p.MinLimit > concurrency.MaxLimit {
		return bad(f+".min_limit", "must be at most %d, got %d", concurrency.MaxLimit, p.MinLimit)
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
		return p.algorithmError(f, err)
	}
	if err := p.validateQueue(f); err != nil {
		return err
	}
	cfg := p.coreConfig(p.Limit)
	cfg.Algorithm = alg
	return checkCore(f, cfg)
}

// algorithmError names the file's key behind an error of the adaptive
// package, which names its Go config (LittleConfig.InitialLimit): the
// policy's limit, min_limit or max_limit where the policy set it, else
// the key in the algorithm's own section (little.initiallimit).
func (p AdaptivePolicy) algorithmError(f string, err error) error {
	alg := f + "." + string(p.algorithm())
	var ce *sluice.ConfigError
	if !errors.As(err, &ce) {
		return bad(alg, "%v", err)
	}
	_, name, _ := strings.Cut(ce.Field, ".") // InitialLimit
	key, names := alg+"."+strings.ToLower(name), algorithmKeys
	for _, l := range []struct {
		goName, key string
		v           int
	}{{"InitialLimit", "limit", p.Limit}, {"MinLimit", "min_limit", p.MinLimit}, {"MaxLimit", "max_limit", p.MaxLimit}} {
		if name == l.goName && l.v != 0 {
			key, names = f+"."+l.key, policyNames
		}
	}
	return configProblem(key, names, ce)
}

// The Go names in the decision code's messages, spelled as a file's keys:
// the policy's own, or those of an algorithm's section.
var (
	policyNames   = strings.NewReplacer("Config.Limit", "limit", "MinLimit", "min_limit", "MaxLimit", "max_limit")
	algorithmKeys = strings.NewReplacer("InitialLimit", "initiallimit", "MinLimit", "minlimit", "MaxLimit", "maxlimit")
)

// configProblem is ce, a config error of the decision code, as a problem
// with the file's key field.
func configProblem(field string, names *strings.Replacer, ce *sluice.ConfigError) error {
	allowed := names.Replace(ce.Allowed)
	if ce.Value == nil {
		return bad(field, "%s", allowed)
	}
	return bad(field, "%s, got %v", allowed, ce.Value)
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
// its bounds), so that Run cannot fail on a scenario Validate passed. The
// error names the file's key (queue), not the Go field (Config.MaxQueue).
func checkCore(f string, cfg concurrency.Config) error {
	_, err := concurrency.NewCore(cfg)
	if err == nil {
		return nil
	}
	var ce *sluice.ConfigError
	if !errors.As(err, &ce) {
		return bad(f, "%v", err)
	}
	key, ok := coreKeys[ce.Field]
	if !ok {
		return bad(f, "%v", err)
	}
	return configProblem(f+"."+key, policyNames, ce)
}

// coreKeys are the file's keys of the concurrency.Config fields.
var coreKeys = map[string]string{
	"Config.Limit": "limit", "Config.Algorithm.Limit()": "limit", "Config.MaxQueue": "queue",
	"Config.MaxWait": "max_wait", "Config.MaxWaitServices": "max_wait_services",
	"Config.Discipline": "discipline", "Config.CoDelTarget": "codel_target", "Config.CoDelInterval": "codel_interval",
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
		key := "codel_target"
		if q.CoDelTarget == 0 {
			key = "codel_interval" // the one set
		}
		return bad(f+"."+key, "applies only to the codel and adaptive_lifo disciplines")
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
