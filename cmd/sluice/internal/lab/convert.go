package lab

import (
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/cmd/sluice/internal/origin"
	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/sim"
)

// gaugeSample is the state of a policy and its origin at one instant.
type gaugeSample struct {
	at               time.Duration // since the sampler started
	limit            float64
	inFlight, queued int
	capacity         float64
	busy, queue      int
	served           uint64 // origin answers so far (200 and 500)
}

// gauges samples state at every interval's end while a run goes on: the
// load generator reports what clients saw, not the limit or the origin.
type gauges struct {
	every   time.Duration
	mu      sync.Mutex
	samples []gaugeSample
	quit    chan struct{}
	done    sync.WaitGroup
}

func (g *gauges) start(read func() gaugeSample) {
	g.quit = make(chan struct{})
	g.done.Add(1)
	t0 := time.Now()
	go func() {
		defer g.done.Done()
		tk := time.NewTicker(g.every)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				s := read()
				s.at = time.Since(t0)
				g.mu.Lock()
				g.samples = append(g.samples, s)
				g.mu.Unlock()
			case <-g.quit:
				return
			}
		}
	}()
}

func (g *gauges) stop() []gaugeSample {
	close(g.quit)
	g.done.Wait()
	return g.samples
}

// fromLoad puts a load generator's result and the gauges into the
// simulator's report model, so the two sides compare field by field.
func fromLoad(res *load.Result, samples []gaugeSample, s sim.Scenario, interval time.Duration) *report.Policy {
	window := (s.Duration - s.Warmup).Seconds()
	sum := report.Summary{
		GoodputRPS: res.Goodput,
		Sent:       res.Sent,
		Unsent:     res.Skipped,
		Successes:  res.Good,
		// The generator counts by intended send time already.
		SucceededBySend: res.Good,
		Failed:          res.Sent - res.Good - res.Unfinished,
		Timeouts:        res.Errors["timeout"],
		Rejected:        map[string]int64{},
		Success:         percentiles(res.Success),
		Rejection:       percentiles(res.Rejection),
		Late:            res.Late,
	}
	lag := percentiles(res.SendLag)
	sum.SendLag = &lag
	if window > 0 {
		sum.OfferedRPS = float64(res.Sent) / window
	}
	for reason, n := range res.Reasons {
		switch {
		case reason == origin.ReasonQueueFull:
			sum.Refused += n
		case reason == origin.ReasonTimeout:
			sum.OriginTimeouts += n
		case strings.HasPrefix(reason, "origin-"), n == 0:
		default:
			if reason == "" {
				reason = "unnamed"
			}
			sum.Rejected[reason] += n
			sum.RejectedTotal += n
		}
	}
	// Capacity and throughput over the measured window, from the gauges.
	var capSum float64
	var capN int
	var servedAtWarmup, servedAtEnd uint64
	for _, g := range samples {
		if g.at <= s.Warmup {
			servedAtWarmup = g.served
			continue
		}
		if g.at <= s.Duration+interval/2 {
			capSum += g.capacity
			capN++
			servedAtEnd = g.served
		}
	}
	if capN > 0 {
		sum.CapacityRPS = capSum / float64(capN)
	}
	if window > 0 && servedAtEnd > servedAtWarmup {
		sum.ThroughputRPS = float64(servedAtEnd-servedAtWarmup) / window
	}
	if sum.CapacityRPS > 0 {
		sum.GoodputPct = 100 * sum.GoodputRPS / sum.CapacityRPS
	}

	out := &report.Policy{Summary: sum, Series: make([]report.Point, 0, len(res.Series))}
	for i, pt := range res.Series {
		rp := report.Point{
			TS:            pt.T.Seconds(),
			OfferedRPS:    pt.Offered,
			GoodputRPS:    pt.Goodput,
			ThroughputRPS: pt.Throughput,
			RejectedRPS:   pt.Rejects,
			// The load generator counts every event by its request's
			// intended send time.
			RejectedBySendRPS: pt.Rejects,
			TimeoutsRPS:       pt.Timeouts,
			P50Ms:             ms(pt.P50),
			P95Ms:             ms(pt.P95),
			P99Ms:             ms(pt.P99),
		}
		if i < len(samples) {
			g := samples[i]
			rp.CapacityRPS, rp.Limit, rp.InFlight, rp.Queued = g.capacity, g.limit, g.inFlight, g.queued
			rp.OriginBusy, rp.OriginQueue = g.busy, g.queue
		}
		out.Series = append(out.Series, rp)
	}
	return out
}

func percentiles(p load.Percentiles) report.Latency {
	return report.Latency{Count: p.Count, P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), P999: ms(p.P999), Max: ms(p.Max)}
}
