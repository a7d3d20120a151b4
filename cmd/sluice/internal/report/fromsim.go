package report

import (
	"time"

	"github.com/sluicehq/sluice/sim"
)

// FromSim builds a Report from a simulator run of s. within, when > 0, adds
// the "served within" counts (see Within).
func FromSim(s sim.Scenario, res sim.Result, within time.Duration) *Report {
	interval := s.Interval
	if interval == 0 {
		interval = time.Second // sim's documented default
	}
	r := &Report{
		Version:   Version,
		Scenario:  res.Scenario,
		Seed:      res.Seed,
		DurationS: s.Duration.Seconds(),
		IntervalS: interval.Seconds(),
		Policies:  make([]Policy, 0, len(res.Policies)),
	}
	window := (s.Duration - s.Warmup).Seconds()
	for i := range res.Policies {
		pr := &res.Policies[i]
		var kind string
		if i < len(s.Policies) {
			kind = string(s.Policies[i].Kind())
		}
		r.Policies = append(r.Policies, Policy{
			Name:    pr.Name,
			Kind:    kind,
			Summary: summary(pr, window, within),
			Phases:  phases(s, pr.Series),
			Series:  points(pr.Series),
		})
	}
	return r
}

func summary(pr *sim.PolicyResult, window float64, within time.Duration) Summary {
	ss := pr.Summary
	out := Summary{
		GoodputRPS:      ss.Goodput,
		ThroughputRPS:   ss.Throughput,
		CapacityRPS:     ss.Capacity,
		Sent:            ss.Sent,
		Unsent:          ss.Unsent,
		Successes:       ss.Successes,
		SucceededBySend: ss.SucceededBySend,
		Failed:          ss.Failed,
		Timeouts:        ss.Timeouts,
		Refused:         ss.Refused,
		OriginTimeouts:  ss.OriginTimeouts,
		Retries:         ss.Retries,
		Wasted:          ss.Wasted,
		Rejected:        map[string]int64{},
		Success:         latency(ss.Latency),
		Rejection:       latency(ss.RejectLatency),
		Wait:            latency(ss.Wait),
		DemandRPS:       ss.Demand,
		MeanLatencyMs:   ms(ss.MeanLatency),
		MeanWaitMs:      ms(ss.MeanWait),
	}
	if window > 0 {
		out.OfferedRPS = float64(ss.Sent) / window
	}
	out.GoodputPct = pct(ss.Goodput, ss.Capacity)
	out.AchievableRPS = ss.Achievable
	out.GoodputPctOfAchievable = pct(ss.Goodput, out.AchievableRPS)
	for k, v := range ss.Rejects {
		if v != 0 {
			out.Rejected[k] = v
			out.RejectedTotal += v
		}
	}
	if within > 0 {
		out.Within = &Within{
			BoundMs:   ms(within),
			Successes: pr.SucceededWithin(within),
			Admitted:  pr.AdmittedWithin(within),
		}
	}
	return out
}

func points(series []sim.Point) []Point {
	out := make([]Point, len(series))
	for i, p := range series {
		out[i] = Point{
			TS:                p.T.Seconds(),
			OfferedRPS:        p.Offered,
			GoodputRPS:        p.Goodput,
			ThroughputRPS:     p.Throughput,
			RejectedRPS:       p.Rejects,
			RejectedBySendRPS: p.RejectedSent,
			RejectedByRPS:     p.RejectsBy,
			TimeoutsRPS:       p.Timeouts,
			CapacityRPS:       p.Capacity,
			DemandRPS:         p.Demand,
			AchievableRPS:     p.Achievable,
			P50Ms:             ms(p.P50),
			P99Ms:             ms(p.P99),
			AdmittedP50Ms:     ms(p.AdmittedP50),
			Limit:             p.Limit,
			InFlight:          p.InFlight,
			Queued:            p.Queued,
			OriginBusy:        p.OriginBusy,
			OriginQueue:       p.OriginQ,
		}
	}
	return out
}

func latency(p sim.Percentiles) Latency {
	return Latency{Count: p.Count, P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), P999: ms(p.P999), Max: ms(p.Max)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// phases averages goodput and capacity over the series points between the
// origin's changes; nil when the origin never changes.
func phases(s sim.Scenario, series []sim.Point) []Phase {
	if len(s.Origin.Changes) == 0 {
		return nil
	}
	bounds := []time.Duration{0}
	for _, c := range s.Origin.Changes {
		if c.At > bounds[len(bounds)-1] && c.At < s.Duration {
			bounds = append(bounds, c.At)
		}
	}
	bounds = append(bounds, s.Duration)
	out := make([]Phase, 0, len(bounds)-1)
	for i := 1; i < len(bounds); i++ {
		from, to := bounds[i-1], bounds[i]
		var good, capacity, demand, achievable float64
		n := 0
		for _, p := range series {
			if p.T > from && p.T <= to {
				good += p.Goodput
				capacity += p.Capacity
				demand += p.Demand
				achievable += p.Achievable
				n++
			}
		}
		ph := Phase{FromS: from.Seconds(), ToS: to.Seconds()}
		if n > 0 {
			ph.GoodputRPS, ph.CapacityRPS, ph.DemandRPS = good/float64(n), capacity/float64(n), demand/float64(n)
			ph.AchievableRPS = achievable / float64(n)
		}
		ph.GoodputPct = pct(ph.GoodputRPS, ph.CapacityRPS)
		ph.GoodputPctOfAchievable = pct(ph.GoodputRPS, ph.AchievableRPS)
		out = append(out, ph)
	}
	return out
}

// pct is part as a percentage of whole, 0 when whole is 0.
func pct(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part / whole
}
