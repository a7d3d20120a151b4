package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

func validScenario() Scenario {
	return Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 4, Service: Dist{Kind: Constant, Mean: 10 * ms}},
		Load:     Load{Rate: 100},
		Policies: []Policy{NonePolicy{}},
	}
}

func TestValidate(t *testing.T) {
	if err := func() *Scenario { s := validScenario(); return &s }().Validate(); err != nil {
		t.Fatalf("valid scenario: %v", err)
	}
	tests := []struct {
		field string
		edit  func(*Scenario)
	}{
		{"duration", func(s *Scenario) { s.Duration = 0 }},
		{"interval", func(s *Scenario) { s.Interval = -time.Second }},
		{"interval", func(s *Scenario) { s.Interval = time.Minute }},
		{"warmup", func(s *Scenario) { s.Warmup = s.Duration }},
		// Shorter than one interval: a rate over 1 ns is 1e9 per second.
		{"duration", func(s *Scenario) { s.Duration = time.Nanosecond }},
		{"warmup", func(s *Scenario) { s.Warmup = s.Duration - time.Millisecond }},
		{"origin.workers", func(s *Scenario) { s.Origin.Workers = 0 }},
		{"origin.queue", func(s *Scenario) { s.Origin.Queue = -2 }},
		{"origin.timeout", func(s *Scenario) { s.Origin.Timeout = -1 }},
		{"origin.service.kind", func(s *Scenario) { s.Origin.Service.Kind = "" }},
		{"origin.service.kind", func(s *Scenario) { s.Origin.Service.Kind = "pareto" }},
		{"origin.service.mean", func(s *Scenario) { s.Origin.Service.Mean = 0 }},
		{"origin.service.sigma", func(s *Scenario) { s.Origin.Service.Sigma = 1 }},
		// Accepted up to 10 once: past MaxSigma a run cannot see the mean.
		{"origin.service.sigma", func(s *Scenario) {
			s.Origin.Service = Dist{Kind: Lognormal, Mean: ms, Sigma: MaxSigma + 0.5}
		}},
		{"origin.service.tail", func(s *Scenario) { s.Origin.Service.Kind = Bimodal }},
		{"origin.service.tail_fraction", func(s *Scenario) {
			s.Origin.Service = Dist{Kind: Bimodal, Mean: ms, Tail: 10 * ms, TailFraction: 2}
		}},
		{"origin.changes[1].at", func(s *Scenario) {
			s.Origin.Changes = []Change{{At: 2 * time.Second, Workers: 2}, {At: time.Second, Workers: 3}}
		}},
		{"origin.changes[0]", func(s *Scenario) { s.Origin.Changes = []Change{{At: time.Second}} }},
		{"origin.changes[0].service.mean", func(s *Scenario) {
			s.Origin.Changes = []Change{{At: time.Second, Service: Dist{Kind: Constant}}}
		}},
		{"origin.changes[0].service.kind", func(s *Scenario) {
			s.Origin.Changes = []Change{{At: time.Second, Service: Dist{Mean: ms}}}
		}},
		{"load.arrivals", func(s *Scenario) { s.Load.Arrivals = "bursty" }},
		{"load.rate", func(s *Scenario) { s.Load.Rate = -1 }},
		{"load.rate", func(s *Scenario) { s.Load.Rate = 0 }},
		{"load.steps[1].at", func(s *Scenario) {
			s.Load.Steps = []Step{{At: 2 * time.Second, Rate: 1}, {At: 2 * time.Second, Rate: 2}}
		}},
		{"load.steps[0].rate", func(s *Scenario) { s.Load.Steps = []Step{{At: time.Second, Rate: -3}} }},
		{"load.ramp", func(s *Scenario) { s.Load.Ramp = true }},
		{"load.bursts.count", func(s *Scenario) { s.Load.Bursts = Bursts{Size: 10} }},
		{"load.bursts.every", func(s *Scenario) { s.Load.Bursts = Bursts{Size: 10, Count: 2} }},
		{"load.bursts.size", func(s *Scenario) { s.Load.Bursts = Bursts{Count: 2} }},
		{"load.timeout", func(s *Scenario) { s.Load.Timeout = -1 }},
		{"load.client_workers", func(s *Scenario) { s.Load.ClientWorkers = -1 }},
		{"load.retries.max", func(s *Scenario) { s.Load.Retries.Max = -1 }},
		{"load.retries.budget", func(s *Scenario) { s.Load.Retries.Budget = -0.5 }},
		{"load.retries.backoff", func(s *Scenario) { s.Load.Retries.Backoff = -1 }},
		{"policies", func(s *Scenario) { s.Policies = nil }},
		// A policy of no kind (a nil Policy); fields of another kind do not
		// exist on a policy's type, so there is nothing to refuse for them.
		{"policies[0].kind", func(s *Scenario) { s.Policies[0] = nil }},
		// A nil pointer to a policy type (a Policy too: the methods are on
		// the values) is no policy either; Validate panicked on it.
		{"policies[0].kind", func(s *Scenario) { s.Policies[0] = (*ConcurrencyPolicy)(nil) }},
		{"policies[0].queue", func(s *Scenario) { s.Policies[0] = TickerPolicy{Rate: 1, Queue: -2} }},
		{"policies[0].max_wait", func(s *Scenario) { s.Policies[0] = TokenBucketPolicy{Rate: 1, MaxWait: -1} }},
		{"policies[0].limit", func(s *Scenario) { s.Policies[0] = ConcurrencyPolicy{} }},
		{"policies[0].algorithm", func(s *Scenario) { s.Policies[0] = AdaptivePolicy{Algorithm: "bbr"} }},
		{"policies[0].min_limit", func(s *Scenario) { s.Policies[0] = AdaptivePolicy{MinLimit: 5, MaxLimit: 4} }},
		{"policies[0].aimd.backoff", func(s *Scenario) {
			s.Policies[0] = AdaptivePolicy{Algorithm: AIMD, AIMD: adaptive.AIMDConfig{Backoff: 1.5}}
		}},
		{"policies[0].vegas", func(s *Scenario) {
			s.Policies[0] = AdaptivePolicy{Vegas: adaptive.VegasConfig{Alpha: 1}}
		}},
		{"policies[0].rate", func(s *Scenario) { s.Policies[0] = TokenBucketPolicy{} }},
		{"policies[0].burst", func(s *Scenario) { s.Policies[0] = TickerPolicy{Rate: 5, Burst: -1} }},
		// A bucket the rate package cannot build: it would take 317 years
		// to fill. Run failed on it after Validate passed.
		{"policies[0].burst", func(s *Scenario) { s.Policies[0] = TokenBucketPolicy{Rate: 1, Burst: 1e10} }},
		{"policies[0].queue", func(s *Scenario) { s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{Queue: -5}} }},
		{"policies[0].max_wait", func(s *Scenario) { s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{MaxWait: -1}} }},
		{"policies[0].max_wait_services", func(s *Scenario) {
			s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{MaxWaitServices: -1}}
		}},
		{"policies[0].max_wait_services", func(s *Scenario) {
			s.Policies[0] = AdaptivePolicy{QueueConfig: QueueConfig{MaxWaitServices: math.NaN()}}
		}},
		{"policies[0].discipline", func(s *Scenario) {
			s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{Discipline: 42}}
		}},
		{"policies[0].codel_target", func(s *Scenario) {
			s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{CoDelTarget: time.Second}}
		}},
		// What the decision code refuses.
		{"policies[0].limit", func(s *Scenario) { s.Policies[0] = ConcurrencyPolicy{Limit: concurrency.MaxLimit + 1} }},
		// The size of the run, and times whose sums would overflow.
		{"duration", func(s *Scenario) { s.Duration = maxDuration + 1 }},
		{"interval", func(s *Scenario) { s.Interval = time.Microsecond }},
		{"duration", func(s *Scenario) { s.Duration, s.Load.Rate = time.Hour, 1e4 }},
		{"duration", func(s *Scenario) { s.Load.Retries.Max, s.Load.Rate = 100, 1e4 }},
		{"duration", func(s *Scenario) { s.Load.Bursts = Bursts{Size: 1e7, Count: 2, Every: time.Second} }},
		{"policies", func(s *Scenario) {
			s.Load.Rate = 9e5
			s.Policies = []Policy{NonePolicy{}, NonePolicy{}, NonePolicy{}, NonePolicy{}, NonePolicy{}, NonePolicy{}}
		}},
		{"origin.timeout", func(s *Scenario) { s.Origin.Timeout = maxDuration + 1 }},
		{"load.retries.backoff", func(s *Scenario) { s.Load.Retries.Backoff = maxDuration + 1 }},
		{"policies[0].max_wait", func(s *Scenario) {
			s.Policies[0] = ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{MaxWait: maxDuration + 1}}
		}},
	}
	for _, tt := range tests {
		s := validScenario()
		tt.edit(&s)
		err := s.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a *FieldError", tt.field, err)
			continue
		}
		if fe.Field != tt.field {
			t.Errorf("got field %q (%v), want %q", fe.Field, err, tt.field)
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%v: want errors.Is ErrInvalid and the field in the message", err)
		}
		if _, err := Run(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Run returned %v, want the validation error", tt.field, err)
		}
	}
}

// TestValidateNegativeChange: a change before the start is named as such,
// not as out of time order (it is the first).
func TestValidateNegativeChange(t *testing.T) {
	s := validScenario()
	s.Origin.Changes = []Change{{At: -time.Second, Workers: 2}}
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "origin.changes[0].at") || !strings.Contains(err.Error(), "must be >= 0") {
		t.Errorf("err = %v, want origin.changes[0].at: must be >= 0", err)
	}
}

// TestValidateNamesTheKeySet: an error names the key the file set, in the
// file's spelling. It named a sibling key that was not set (codel_target
// for codel_interval, tail for tail_fraction, limit for max_limit), or the
// decision code's Go fields (LittleConfig.InitialLimit, Config.MaxQueue).
func TestValidateNamesTheKeySet(t *testing.T) {
	for _, tc := range []struct {
		p     Policy
		field string
		msg   string
	}{
		{ConcurrencyPolicy{Limit: 2, QueueConfig: QueueConfig{CoDelInterval: time.Second}}, "policies[0].codel_interval", "applies only to the codel and adaptive_lifo disciplines"},
		{AdaptivePolicy{MaxLimit: -3}, "policies[0].max_limit", "must be >= 0 (0: the algorithm's default), got -3"},
		{AdaptivePolicy{MinLimit: -1}, "policies[0].min_limit", "must be >= 0 (0: the algorithm's default), got -1"},
		{AdaptivePolicy{Limit: 2000}, "policies[0].limit", "must be within [min_limit, max_limit] = [1, 1000], got 2000"},
		{AdaptivePolicy{Limit: 20000000}, "policies[0].limit", "must be at most 16777215, got 20000000"},
		{AdaptivePolicy{MinLimit: 20000000}, "policies[0].min_limit", "must be at most 16777215, got 20000000"},
		{AdaptivePolicy{Algorithm: Gradient2, MaxLimit: 10, Limit: 20}, "policies[0].limit", "must be within [min_limit, max_limit] = [1, 10], got 20"},
		{AdaptivePolicy{Little: adaptive.LittleConfig{InitialLimit: 2000}}, "policies[0].little.initiallimit", "must be within [minlimit, maxlimit] = [1, 1000], got 2000"},
		{AdaptivePolicy{QueueConfig: QueueConfig{Queue: 20000000}}, "policies[0].queue", "must be 0 (no queue) to 16777215, got 20000000"},
		{ConcurrencyPolicy{Limit: 20000000}, "policies[0].limit", "must be 1 to 16777215, got 20000000"},
	} {
		s := validScenario()
		s.Policies[0] = tc.p
		var fe *FieldError
		if err := s.Validate(); !errors.As(err, &fe) || fe.Field != tc.field || fe.Problem != tc.msg {
			t.Errorf("%+v: %v, want %s: %s", tc.p, err, tc.field, tc.msg)
		}
	}
	s := validScenario()
	s.Origin.Service = Dist{Kind: Constant, Mean: 100 * time.Millisecond, TailFraction: 0.5}
	var fe *FieldError
	if err := s.Validate(); !errors.As(err, &fe) || fe.Field != "origin.service.tail_fraction" {
		t.Errorf("tail_fraction on a constant service: %v, want origin.service.tail_fraction", err)
	}
}
