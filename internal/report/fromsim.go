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
			kind = string(s.Policies[i].Kind)
		}
		r.Policies = append(r.Policies, Policy{
			Name:    pr.Name,
			Kind:    kind,
			Summary: summary(pr, window, within),
			Series:  points(pr.Series),
		})
	}
	return r
}

func summary(pr *sim.PolicyResult, window float64, within time.Duration) Summary {
	ss := pr.Summary
	out := Summary{
		GoodputRPS:     ss.Goodput,
		ThroughputRPS:  ss.Throughput,
		CapacityRPS:    ss.Capacity,
		Sent:           ss.Sent,
		Unsent:         ss.Unsent,
		Successes:      ss.Successes,
		Failed:         ss.Failed,
		Timeouts:       ss.Timeouts,
		Refused:        ss.Refused,
		OriginTimeouts: ss.OriginTimeouts,
		Retries:        ss.Retries,
		Wasted:         ss.Wasted,
		Rejected:       map[string]int64{},
		Success:        latency(ss.Latency),
		Rejection:      latency(ss.RejectLatency),
		Wait:           latency(ss.Wait),
	}
	if window > 0 {
		out.OfferedRPS = float64(ss.Sent) / window
	}
	if ss.Capacity > 0 {
		out.GoodputPct = 100 * ss.Goodput / ss.Capacity
	}
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
			TS:            p.T.Seconds(),
			OfferedRPS:    p.Offered,
			GoodputRPS:    p.Goodput,
			ThroughputRPS: p.Throughput,
			RejectedRPS:   p.Rejects,
			RejectedByRPS: p.RejectsBy,
			TimeoutsRPS:   p.Timeouts,
			CapacityRPS:   p.Capacity,
			P50Ms:         ms(p.P50),
			P99Ms:         ms(p.P99),
			Limit:         p.Limit,
			InFlight:      p.InFlight,
			Queued:        p.Queued,
			OriginBusy:    p.OriginBusy,
			OriginQueue:   p.OriginQ,
		}
	}
	return out
}

func latency(p sim.Percentiles) Latency {
	return Latency{Count: p.Count, P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), P999: ms(p.P999), Max: ms(p.Max)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
