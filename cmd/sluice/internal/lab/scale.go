package lab

import (
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/sim"
)

// Scale returns s with its clock sped up by k (0 < k <= 1 makes it faster):
// every duration is multiplied by k and every rate divided by it, so the
// ratios that decide the outcome stay as they were — offered load over
// capacity (workers / service time), waits over service times, client
// timeouts over latencies, and the number of requests sent. Seed 003 at
// k = 0.05 turns 1 s of work into 50 ms and 5 rps into 100 rps. Counts
// (workers, queue lengths, limits, bursts) do not change. k = 1 returns s.
func Scale(s sim.Scenario, k float64) sim.Scenario {
	if k == 1 || k <= 0 {
		return s
	}
	d := func(v *time.Duration) { *v = time.Duration(float64(*v) * k) }
	r := func(v *float64) { *v /= k }

	d(&s.Duration)
	d(&s.Interval)
	if s.Interval == 0 {
		s.Interval = time.Duration(float64(time.Second) * k) // the default 1 s, scaled
	}
	d(&s.Warmup)

	o := s.Origin
	d(&o.Timeout)
	o.Service = scaleDist(o.Service, k)
	o.Changes = append([]sim.Change(nil), o.Changes...)
	for i := range o.Changes {
		d(&o.Changes[i].At)
		o.Changes[i].Service = scaleDist(o.Changes[i].Service, k)
	}
	s.Origin = o

	l := s.Load
	r(&l.Rate)
	l.Steps = append([]sim.Step(nil), l.Steps...)
	for i := range l.Steps {
		d(&l.Steps[i].At)
		r(&l.Steps[i].Rate)
	}
	d(&l.Bursts.Every)
	d(&l.Bursts.At)
	d(&l.Timeout)
	d(&l.Retries.Backoff)
	s.Load = l

	s.Policies = append([]sim.Policy(nil), s.Policies...)
	for i, p := range s.Policies {
		s.Policies[i] = scalePolicy(p, k)
	}
	return s
}

func scaleDist(x sim.Dist, k float64) sim.Dist {
	x.Mean = time.Duration(float64(x.Mean) * k)
	x.Tail = time.Duration(float64(x.Tail) * k)
	return x
}

// scalePolicy scales a policy's durations by k and its rates by 1/k. The
// time-valued defaults it relies on are written down first, so that they
// scale too: a default of 1 s left at 0 would stay 1 s while everything
// around it shrank.
func scalePolicy(p sim.Policy, k float64) sim.Policy {
	d := func(v *time.Duration) { *v = time.Duration(float64(*v) * k) }
	queue := func(q *sim.QueueConfig) {
		if q.Discipline == concurrency.CoDel || q.Discipline == concurrency.AdaptiveLIFO {
			if q.CoDelTarget == 0 {
				q.CoDelTarget = 5 * time.Millisecond // concurrency.Config's documented default
			}
			if q.CoDelInterval == 0 {
				q.CoDelInterval = 100 * time.Millisecond // concurrency.Config's documented default
			}
		}
		d(&q.MaxWait)
		d(&q.CoDelTarget)
		d(&q.CoDelInterval)
	}
	switch q := p.(type) {
	case sim.ConcurrencyPolicy:
		queue(&q.QueueConfig)
		return q
	case sim.AdaptivePolicy:
		queue(&q.QueueConfig)
		switch q.Algorithm {
		case sim.AIMD:
			if q.AIMD.Interval == 0 {
				q.AIMD.Interval = time.Second // AIMDConfig's documented default
			}
		case sim.Vegas:
			if q.Vegas.NoLoadWindow == 0 {
				q.Vegas.NoLoadWindow = 30 * time.Second // VegasConfig's documented default
			}
		}
		d(&q.AIMD.Interval)
		d(&q.AIMD.Timeout)
		d(&q.Vegas.NoLoadWindow)
		d(&q.Vegas.Timeout)
		d(&q.Gradient2.Timeout)
		d(&q.Little.Timeout)
		return q
	case sim.TokenBucketPolicy:
		d(&q.MaxWait)
		q.Rate /= k
		return q
	case sim.TickerPolicy:
		d(&q.MaxWait)
		q.Rate /= k
		return q
	}
	return p
}

// ScaleLoad returns s with the load's schedule alone shortened by k: the
// duration, warm-up and series interval, the steps' and bursts' times. The
// origin (its service times and changes), the policies and the client
// timeout keep their values, so the same rates are offered, each for less
// time. Use it for a scenario whose figures are per offered rate (a ramp),
// not for one whose origin changes in time. k = 1 returns s.
func ScaleLoad(s sim.Scenario, k float64) sim.Scenario {
	if k == 1 || k <= 0 {
		return s
	}
	d := func(v *time.Duration) { *v = time.Duration(float64(*v) * k) }
	d(&s.Duration)
	d(&s.Warmup)
	if s.Interval == 0 {
		s.Interval = time.Second
	}
	d(&s.Interval)
	s.Load.Steps = append([]sim.Step(nil), s.Load.Steps...)
	for i := range s.Load.Steps {
		d(&s.Load.Steps[i].At)
	}
	d(&s.Load.Bursts.Every)
	d(&s.Load.Bursts.At)
	return s
}
