package sim

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

// The acceptance bars, run on the seeds' experiments. Each test
// logs the figures it checks, so `go test -v -run Acceptance` is a report.

const ms = time.Millisecond

// seed003 is seed 003's slowdown: an origin of 7 workers and a queue of 100
// whose work goes from 1 s to 2 s at t = 60 s (capacity 7 → 3.5 rps), and
// back to 1 s at t = 180 s; clients send 5 rps with 10 workers and give up
// after 2.5 s.
func seed003(policies ...Policy) Scenario {
	return Scenario{
		Name: "seed003-slowdown", Seed: 3, Duration: 240 * time.Second,
		Origin: Origin{
			Workers: 7, Queue: 100, Service: Dist{Kind: Constant, Mean: time.Second},
			Changes: []Change{
				{At: 60 * time.Second, Service: Dist{Kind: Constant, Mean: 2 * time.Second}},
				{At: 180 * time.Second, Service: Dist{Kind: Constant, Mean: time.Second}},
			},
		},
		Load:     Load{Arrivals: ConstantArrivals, Rate: 5, Timeout: 2500 * ms, ClientWorkers: 10},
		Policies: policies,
	}
}

// seed003Adaptive is the adaptive limiter the slowdown is judged with: AIMD
// as seed 003 ran it (+1, back off on a client timeout), with Netflix's
// backoff of 0.9, at most one change per 3 s (longer than the slow origin's
// round trip), and a queue of one request in front of the limit, served
// newest first.
//
// Why the queue. The origin (7 workers, 2 s each) is kept busy only if a
// request is ready whenever a worker frees. With no queue in front, a limit
// of 7 leaves the freed worker idle until the next arrival (7 / (2 s +
// that gap) < 3.5 rps), and a limit of 8 parks the eighth request in the
// origin's own FIFO, where it waits for the next completion: with constant
// arrivals and constant work the completions lock into a fixed pattern
// (the origin's queue never empties, so no worker's phase ever moves) with
// gaps of up to 0.8 s, more than the 0.5 s the client's 2.5 s leaves, and
// the request behind the gap times out every cycle. No integer limit
// reaches 95% without a queue. With one waiting slot at the limiter, a
// limit of 7 (= workers) keeps every worker busy and no request queues at
// the origin; LIFO, because a newcomer is fresher than the waiter it
// replaces, and one slot, because a longer queue holds requests that would
// time out and the client workers waiting on them. The wait is bounded by
// the seed's own figure, 2.5 s − 2 s = 0.5 s "to stay in a queue": a
// request that waited longer cannot make its deadline, and admitting it
// would end in a Dropped that the origin did not cause, which AIMD would
// read as overload (with Poisson arrivals it did, twice a minute). AIMD
// settles at 7: the probes to 8 fail, and AIMD waits exponentially longer
// before each (see adaptive.AIMD).
var seed003Adaptive = AdaptivePolicy{
	Name: "adaptive", Algorithm: AIMD, Limit: 5,
	QueueConfig: QueueConfig{Queue: 1, Discipline: concurrency.LIFO, MaxWait: 500 * ms},
	AIMD:        adaptive.AIMDConfig{Interval: 3 * time.Second, Backoff: 0.9},
}

// mean averages f over the points with T in (from, to], 0 if there are none.
func mean(ps []Point, from, to time.Duration, f func(Point) float64) float64 {
	var sum float64
	n := 0
	for _, p := range ps {
		if p.T > from && p.T <= to {
			sum += f(p)
			n++
		}
	}
	return sum / float64(max(n, 1))
}

// window averages goodput over the points with T in (from, to].
func window(ps []Point, from, to time.Duration) float64 {
	return mean(ps, from, to, func(p Point) float64 { return p.Goodput })
}

// converged returns the first time t >= from at which goodput averaged over
// the 10 s ending at t reaches target, and false if it never does by until.
func converged(ps []Point, from, until time.Duration, target float64) (time.Duration, bool) {
	for _, p := range ps {
		if p.T < from+10*time.Second || p.T > until {
			continue
		}
		if window(ps, p.T-10*time.Second, p.T) >= target {
			return p.T, true
		}
	}
	return 0, false
}

func TestAcceptanceSeed003Slowdown(t *testing.T) {
	res, err := Run(seed003(
		NonePolicy{Name: "none"},
		ConcurrencyPolicy{Name: "static-5", Limit: 5},
		seed003Adaptive,
	))
	if err != nil {
		t.Fatal(err)
	}
	none, static, adapt := res.Policies[0], res.Policies[1], res.Policies[2]
	const change = 60 * time.Second
	newCap := 3.5
	for _, p := range res.Policies {
		t.Logf("%-9s goodput before %.2f, 60-90 s %.2f, 90-180 s %.2f, after the slowdown %.2f rps; rejects %v, timeouts %d, wasted %d",
			p.Name, window(p.Series, 0, change), window(p.Series, change, 90*time.Second), window(p.Series, 90*time.Second, 180*time.Second),
			window(p.Series, 210*time.Second, 240*time.Second), p.Summary.Rejects, p.Summary.Timeouts, p.Summary.Wasted)
	}

	// Seed 003's figures for the others: no limit ≈ 0 (every request times
	// out), a static limit of 5 in flight 2.3 rps. Not Little's 5 / 2 s:
	// a slot frees at the instant of a send, which finds it still taken
	// (the events' tie order), and idles until the next send 200 ms later,
	// so 5 / 2.2 s = 2.27 rps; the seed's proxy "oscillates between 4 and 5
	// in-flight requests".
	if g := window(none.Series, 90*time.Second, 180*time.Second); g > 0.1 {
		t.Errorf("no limit: goodput %.2f rps during the slowdown, want ≈ 0 (all time out)", g)
	}
	if g, want := window(static.Series, 90*time.Second, 180*time.Second), 5/2.2; math.Abs(g-want) > 0.02*want {
		t.Errorf("static 5 in flight: goodput %.2f rps during the slowdown, want %.2f ± 2%% (5 / 2.2 s)", g, want)
	}

	// The bar: converge within 30 s of the change, then hold >= 95% of the
	// new capacity over the next 60 s.
	target := 0.95 * newCap
	tc, ok := converged(adapt.Series, change, change+30*time.Second, target)
	if !ok {
		t.Errorf("adaptive: goodput never reached %.3f rps (10 s average) within 30 s of the slowdown", target)
		tc = change + 30*time.Second
	}
	g := window(adapt.Series, tc, tc+60*time.Second)
	t.Logf("adaptive: converged at t = %v (%v after the change); goodput over the next 60 s %.2f rps = %.1f%% of %.1f",
		tc, tc-change, g, 100*g/newCap, newCap)
	if g < target {
		t.Errorf("adaptive: goodput %.2f rps over the 60 s after convergence, want >= %.3f (95%% of %.1f)", g, target, newCap)
	}
}

func TestAcceptanceSeed003Recovery(t *testing.T) {
	res, err := Run(seed003(seed003Adaptive))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Policies[0]
	// After the slowdown the origin can do 7 rps again but the clients
	// offer 5: the most goodput there can be is min(offered, capacity).
	const end = 180 * time.Second
	target := 0.95 * min(5, 7.0)
	tc, ok := converged(p.Series, end, end+30*time.Second, target)
	if !ok {
		t.Fatalf("adaptive: goodput did not return to %.2f rps (10 s average) within 30 s of the slowdown's end", target)
	}
	g := window(p.Series, tc, tc+30*time.Second)
	t.Logf("adaptive: recovered at t = %v (%v after the slowdown ended); goodput over the next 30 s %.2f rps", tc, tc-end, g)
	if g < target {
		t.Errorf("adaptive: goodput %.2f rps after recovery, want >= %.2f", g, target)
	}
}

// With Poisson arrivals the 95% bar is out of reach for any limit: a worker
// that frees during a gap in arrivals idles (7 workers, 2 s work, clients
// that give up after 2.5 s: an Erlang loss system with impatience), and the
// best static limit with the same queue, 7, gets 90–92% of 3.5 rps. The
// adaptive limit must get within 10% of that best static limit, on six
// arrival sequences (it gets within 5%), and serve what is offered once
// the origin is restored.
func TestAcceptanceSeed003PoissonArrivals(t *testing.T) {
	static7 := ConcurrencyPolicy{Name: "static-7", Limit: 7, QueueConfig: seed003Adaptive.QueueConfig}
	for seed := uint64(1); seed <= 6; seed++ {
		sc := seed003(seed003Adaptive, static7)
		sc.Load.Arrivals, sc.Seed = PoissonArrivals, seed
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		adapt, best := res.Policies[0], res.Policies[1]
		ga := window(adapt.Series, 90*time.Second, 180*time.Second)
		gs := window(best.Series, 90*time.Second, 180*time.Second)
		rec, off := window(adapt.Series, 210*time.Second, 240*time.Second), offered(adapt.Series, 210*time.Second, 240*time.Second)
		t.Logf("seed %d: adaptive %.2f rps over 90–180 s (%.0f%% of 3.5), static-7 %.2f (%.0f%%); 30–60 s after the rollback %.2f rps of %.2f offered",
			seed, ga, 100*ga/3.5, gs, 100*gs/3.5, rec, off)
		if ga < 0.9*gs {
			t.Errorf("seed %d: adaptive goodput %.2f rps, want >= 90%% of the best static limit's %.2f", seed, ga, gs)
		}
		if rec < 0.95*off {
			t.Errorf("seed %d: adaptive goodput %.2f rps after the rollback, want >= 95%% of the %.2f offered", seed, rec, off)
		}
	}
}

// offered averages the offered load over the points with T in (from, to].
func offered(ps []Point, from, to time.Duration) float64 {
	return mean(ps, from, to, func(p Point) float64 { return p.Offered })
}

// overload is §15's sweep point: 16 workers, exponential service with mean
// 10 ms (capacity 1,600 rps), Poisson arrivals at k × capacity, a 100 ms
// client deadline, and an origin queue without bound (it is the policy's
// job to bound it).
func overload(k float64, policies ...Policy) Scenario {
	return Scenario{
		Name: fmt.Sprintf("overload-%gx", k), Seed: 15, Duration: 15 * time.Second, Warmup: 5 * time.Second,
		Origin:   Origin{Workers: 16, Queue: Unbounded, Service: Dist{Kind: Exponential, Mean: 10 * ms}},
		Load:     Load{Arrivals: PoissonArrivals, Rate: 1600 * k, Timeout: 100 * ms},
		Policies: policies,
	}
}

func TestAcceptanceOverloadSweep(t *testing.T) {
	good := []Policy{
		ConcurrencyPolicy{Name: "codel", Limit: 16, QueueConfig: QueueConfig{Queue: Unbounded, Discipline: concurrency.CoDel}},
		ConcurrencyPolicy{Name: "adaptive-lifo", Limit: 16, QueueConfig: QueueConfig{Queue: Unbounded, Discipline: concurrency.AdaptiveLIFO}},
		AdaptivePolicy{Name: "gradient2", Algorithm: Gradient2},
		AdaptivePolicy{Name: "aimd", Algorithm: AIMD},
	}
	for _, k := range []float64{1.2, 2, 10} {
		t.Run(fmt.Sprintf("load=%gx", k), func(t *testing.T) {
			res, err := Run(overload(k, append([]Policy{NonePolicy{Name: "fifo-unbounded"}}, good...)...))
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range res.Policies {
				s := p.Summary
				ratio := s.Goodput / s.Capacity
				t.Logf("%-14s goodput %6.1f rps = %5.1f%% of capacity, p50 %v p99 %v, rejects %v, timeouts %d",
					p.Name, s.Goodput, 100*ratio, s.Latency.P50, s.Latency.P99, s.Rejects, s.Timeouts)
				if i == 0 {
					// Queueing theory: with λ > capacity an unbounded FIFO
					// grows without end, every wait passes the deadline.
					if ratio > 0.05 {
						t.Errorf("%s: goodput %.1f%% of capacity, want a collapse (< 5%%)", p.Name, 100*ratio)
					}
					continue
				}
				if ratio < 0.95 {
					t.Errorf("%s: goodput %.1f%% of capacity, want >= 95%%", p.Name, 100*ratio)
				}
			}
		})
	}
}

// seed001 is seed 001's bursts: 200 requests every 500 ms, 5 rounds, at a
// concurrency limit of 50 with a queue of 200, in front of work taking
// 500 ms on average (exponential): 100 rps of capacity for 400 offered.
func seed001(seed uint64, policies ...Policy) Scenario {
	return Scenario{
		Name: "seed001-bursts", Seed: seed, Duration: 15 * time.Second,
		Origin:   Origin{Workers: 1000, Service: Dist{Kind: Exponential, Mean: 500 * ms}},
		Load:     Load{Bursts: Bursts{Size: 200, Every: 500 * ms, Count: 5}},
		Policies: policies,
	}
}

func TestAcceptanceSeed001Bursts(t *testing.T) {
	// CoDel's constants scale with the work: Fail at Scale's 5 ms / 100 ms
	// are for millisecond requests. Here a queue is "standing" once it has
	// not emptied for 1 s (two bursts, two service times), and a waiter in a
	// standing queue may wait 100 ms for a slot.
	//
	// CoDel serves more than FIFO within 1 s and never serves a request
	// that waited longer; it does not match LIFO here. (It seemed to while
	// a burst's requests arrived at one instant: the queue then started at
	// the burst's very instant, and the first wait bound passed exactly as
	// the burst two rounds later arrived, which found an empty queue. On
	// sockets, as now in the simulator, a burst's requests arrive in order,
	// the next burst's first requests find the standing queue, and `sluice
	// lab` measured CoDel 173-205 against LIFO 282 and FIFO 105.)
	pols := []Policy{
		ConcurrencyPolicy{Name: "fifo", Limit: 50, QueueConfig: QueueConfig{Queue: 200}},
		ConcurrencyPolicy{Name: "lifo", Limit: 50, QueueConfig: QueueConfig{Queue: 200, Discipline: concurrency.LIFO}},
		ConcurrencyPolicy{Name: "codel", Limit: 50, QueueConfig: QueueConfig{Queue: 200, Discipline: concurrency.CoDel, CoDelTarget: 100 * ms, CoDelInterval: time.Second}},
	}
	for seed := uint64(1); seed <= 3; seed++ {
		res, err := Run(seed001(seed, pols...))
		if err != nil {
			t.Fatal(err)
		}
		within := make([]int64, len(pols))
		for i, p := range res.Policies {
			within[i] = p.AdmittedWithin(time.Second)
			t.Logf("seed %d %-5s served within 1 s: %d, served in all: %d, rejected: %v",
				seed, p.Name, within[i], p.Summary.Wait.Count, p.Summary.Rejects)
		}
		fifo, lifo, codel := within[0], within[1], within[2]
		if lifo <= fifo {
			t.Errorf("seed %d: LIFO served %d within 1 s, FIFO %d: want LIFO > FIFO (seed 001: 450 vs 339)", seed, lifo, fifo)
		}
		if codel <= fifo {
			t.Errorf("seed %d: CoDel served %d within 1 s, FIFO %d: want CoDel > FIFO", seed, codel, fifo)
		}
		if all := res.Policies[2].Summary.Wait.Count; all != codel {
			t.Errorf("seed %d: CoDel served %d, %d of them within 1 s: want none later (it sheds instead)", seed, all, codel)
		}
	}
}
