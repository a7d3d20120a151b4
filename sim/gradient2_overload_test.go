package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// Gradient2 lets latency reach Tolerance (1.5) × its long-term latency, so
// under sustained overload it holds 1.5–2.5 × the origin's workers in
// flight (more than 1.5 where the long-term latency itself carries some
// queue under Poisson load; see adaptive.Gradient2). Its long-term latency
// used to drift up with the queue it let in (the "service slowed" rule
// read a noisy or queued round trip as a slower service and took it as
// the baseline at once), and it held 6 × the workers in flight with p99
// near the clients' timeout. These runs bound what it holds: at most 2.5 ×
// the workers, p50 at most 2.5 × the mean service time, goodput within 2%
// of AIMD's.

// meanInFlight averages the in-flight samples of the points with T in
// (from, to].
func meanInFlight(ps []Point, from, to time.Duration) float64 {
	return mean(ps, from, to, func(p Point) float64 { return float64(p.InFlight) })
}

// sweep is scenarios/overload-sweep.yaml: 10 workers, lognormal service
// with mean 20 ms (500 rps), Poisson load stepping from 0.5 × to 3 ×
// capacity, clients giving up after 200 ms. The summary covers the steps
// from 1.2 × on.
func sweep(policies ...Policy) Scenario {
	return Scenario{
		Name: "overload-sweep", Seed: 7, Duration: 140 * time.Second, Warmup: 60 * time.Second,
		Origin: Origin{Workers: 10, Queue: Unbounded, Service: Dist{Kind: Lognormal, Mean: 20 * ms, Sigma: 0.6}},
		Load: Load{Arrivals: PoissonArrivals, Rate: 250, Timeout: 200 * ms, Steps: []Step{
			{At: 20 * time.Second, Rate: 400}, {At: 40 * time.Second, Rate: 500},
			{At: 60 * time.Second, Rate: 600}, {At: 80 * time.Second, Rate: 750},
			{At: 100 * time.Second, Rate: 1000}, {At: 120 * time.Second, Rate: 1500},
		}},
		Policies: policies,
	}
}

// checkBounded runs s (Gradient2 first, AIMD second) and checks that
// Gradient2 holds at most 2.5 × workers in flight on average over the
// measured window, that the median success takes at most maxP50, and that
// its goodput is within 2% of AIMD's.
func checkBounded(t *testing.T, s Scenario, workers int, maxP50 time.Duration) {
	t.Helper()
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	g2, aimd := res.Policies[0], res.Policies[1]
	for _, p := range res.Policies {
		t.Logf("%-9s in flight %5.1f, p50 %v, p99 %v, goodput %.1f rps (%.1f%% of capacity)",
			p.Name, meanInFlight(p.Series, s.Warmup, s.Duration), p.Summary.Latency.P50, p.Summary.Latency.P99,
			p.Summary.Goodput, 100*p.Summary.Goodput/p.Summary.Capacity)
	}
	if got, most := meanInFlight(g2.Series, s.Warmup, s.Duration), 2.5*float64(workers); got > most {
		t.Errorf("gradient2 holds %.1f in flight on average, want <= %.1f (2.5 × %d workers)", got, most, workers)
	}
	if got := g2.Summary.Latency.P50; got > maxP50 {
		t.Errorf("gradient2 p50 %v, want <= %v", got, maxP50)
	}
	if g, a := g2.Summary.Goodput, aimd.Summary.Goodput; g < 0.98*a {
		t.Errorf("gradient2 goodput %.1f rps, want within 2%% of AIMD's %.1f", g, a)
	}
}

func TestGradient2BoundedUnderOverloadSweep(t *testing.T) {
	// Past 1.2 × capacity; p50 within 2.5 × the mean service time (Tolerance
	// × the baseline, which itself carries some queue under Poisson load).
	checkBounded(t, sweep(
		AdaptivePolicy{Name: "gradient2", Algorithm: Gradient2},
		AdaptivePolicy{Name: "aimd", Algorithm: AIMD, AIMD: adaptive.AIMDConfig{Timeout: 200 * ms}},
	), 10, 50*ms)
}

func TestGradient2BoundedUnderOverload(t *testing.T) {
	for _, k := range []float64{1.2, 2, 10} {
		t.Run(fmt.Sprintf("load=%gx", k), func(t *testing.T) {
			checkBounded(t, overload(k,
				AdaptivePolicy{Name: "gradient2", Algorithm: Gradient2},
				AdaptivePolicy{Name: "aimd", Algorithm: AIMD},
			), 16, 25*ms)
		})
	}
}
