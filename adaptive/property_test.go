package adaptive

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// algorithms returns a fresh instance of each algorithm, configured the
// same way except where an algorithm needs its overload signal.
func algorithms(t *testing.T, maxLimit int, timeout time.Duration) map[string]Algorithm {
	t.Helper()
	a, err := NewAIMD(AIMDConfig{MaxLimit: maxLimit, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVegas(VegasConfig{MaxLimit: maxLimit})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGradient2(Gradient2Config{MaxLimit: maxLimit})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLittle(LittleConfig{MaxLimit: maxLimit, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Algorithm{"aimd": a, "vegas": v, "gradient2": g, "little": l}
}

// Under a constant healthy latency, with demand always above the limit,
// every algorithm grows to MaxLimit and stays there.
func TestPropertyHealthyGrowsToMax(t *testing.T) {
	m := model{Base: 100 * time.Millisecond, Capacity: 1 << 20, Noise: 0.1, Seed: 1}
	for name, alg := range algorithms(t, 100, 0) {
		r := m.drive(alg, 4*time.Minute) // AIMD needs 80s at +1/s
		if r.minLimit != 100 || r.maxLimit != 100 {
			t.Errorf("%s: limit in [%d, %d] over the second half, want 100", name, r.minLimit, r.maxLimit)
		}
	}
}

// A limit that is not in use does not grow: 30 clients on a service that
// could take any number keep every algorithm below twice their demand.
func TestPropertyUnusedLimitDoesNotGrow(t *testing.T) {
	m := model{Base: 10 * time.Millisecond, Capacity: 1 << 20, Demand: 30, Seed: 1}
	for name, alg := range algorithms(t, 1000, 0) {
		r := m.drive(alg, time.Minute)
		if r.maxLimit > 2*m.Demand+6 { // + one Vegas beta step
			t.Errorf("%s: limit reached %d with %d clients", name, r.maxLimit, m.Demand)
		}
	}
}

// With latency = base × max(1, inFlight/C) and demand always above the
// limit, each algorithm settles near C and never collapses towards
// MinLimit. "Near" is each algorithm's own target:
//   - AIMD (overload = latency above 1.5 × base) saws between 0.75 × and
//     1.5 × C;
//   - Vegas keeps alpha..beta requests queued: C + 3..6 below 100;
//   - Gradient2 lets latency reach Tolerance (1.5) × the baseline;
//   - Little aims for a queueing delay of Headroom (0.25) × the no-load
//     latency: 1.25 × C.
func TestPropertyConvergesNearCapacity(t *testing.T) {
	const base = 50 * time.Millisecond
	band := map[string][2]float64{ // limit / C, over the second half
		"aimd":      {0.7, 1.6},
		"vegas":     {0.9, 2},
		"gradient2": {0.9, 2}, // 1.5 × C, a little more with small, noisy round trips
		"little":    {0.95, 1.4},
	}
	for _, c := range []int{7, 20, 100} {
		for _, noise := range []float64{0, 0.1, 0.3} {
			m := model{Base: base, Capacity: c, Noise: noise, Seed: uint64(c)}
			for name, alg := range algorithms(t, 1000, base*3/2) {
				t.Run(fmt.Sprintf("alg=%s/C=%d/noise=%v", name, c, noise), func(t *testing.T) {
					r := m.drive(alg, 3*time.Minute) // AIMD: 80s from 20 to 100
					lo, hi := band[name][0]*float64(c), band[name][1]*float64(c)+1
					if r.meanLimit < lo || r.meanLimit > hi || float64(r.minLimit) < 0.5*float64(c) {
						t.Errorf("mean limit %.1f (min %d, max %d), want mean in [%.1f, %.1f] and min >= C/2",
							r.meanLimit, r.minLimit, r.maxLimit, lo, hi)
					}
				})
			}
		}
	}
}

// The service itself gets twice as slow (seed 003's bad release) while
// saturated: the latency baselines are re-learned and the limits return
// near C instead of staying pinned low.
func TestPropertyRelearnsAfterSlowdown(t *testing.T) {
	const base = 50 * time.Millisecond
	for _, c := range []int{7, 100} {
		m := model{Base: base, Capacity: c, Noise: 0.1, Seed: 3, SlowAt: 30 * time.Second, SlowBase: 2 * base}
		for name, alg := range algorithms(t, 1000, 3*base) {
			t.Run(fmt.Sprintf("alg=%s/C=%d", name, c), func(t *testing.T) {
				r := m.drive(alg, 4*time.Minute)
				if r.meanLimit < 0.7*float64(c) || r.meanLimit > 2*float64(c)+1 || float64(r.minLimit) < 0.5*float64(c) {
					t.Errorf("after the slowdown: mean limit %.1f (min %d, max %d), want within [0.7, 2] × %d",
						r.meanLimit, r.minLimit, r.maxLimit, c)
				}
			})
		}
	}
}

// Seed 003 in the small: 7 workers at 1 s, then 2 s per request, constant
// (no noise), so that a queue and a slower service cannot be told apart by
// the spread of the latencies. Little must learn the new no-load latency
// by cutting and watching the latency not fall with the in flight (the
// throughput fell instead), and hold the limit at the workers, not at
// half of them.
func TestLittleLearnsASlowerService(t *testing.T) {
	m := model{Base: time.Second, Capacity: 7, Seed: 3, SlowAt: 2 * time.Minute, SlowBase: 2 * time.Second}
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r := m.drive(l, 6*time.Minute) // the slowdown at 2m, judged from 3m
	if got := l.NoLoadLatency(); got < 1900*time.Millisecond || got > 2200*time.Millisecond {
		t.Errorf("no-load latency %v after the slowdown, want about 2s", got)
	}
	if r.minLimit < 7 || r.maxLimit > 9 {
		t.Errorf("limit in [%d, %d] over the last three minutes, want within [7, 9]", r.minLimit, r.maxLimit)
	}
}

// Workers lost and restored, fed by hand: a service of 20 ms (8 or 32 ms,
// alternately: windows as noisy as a lognormal service's) runs 16 at
// no-load; then half its workers go, the latency doubles at the limit and
// Little cuts to about 11; then they come back, and the latency is 20 ms
// again at the limit. If requests wait in the limiter's queue meanwhile
// (Sample.Waiting), the limit, not the service, holds them back: Little
// must grow back to 16 at least six times as fast as from the latency
// alone, whose windows read the same at the service's concurrency and
// below it. Six, because the first window that shows requests held back
// closes on 64 successes when the in flight is below knownAt by more than
// Headroom (see Little.held): waiting for a firm mean, as it did before,
// took 340 ms against 1.96 s.
func TestLittleGrowsBackFastWhenRequestsWait(t *testing.T) {
	const noLoad = 20 * time.Millisecond
	took := map[int]time.Duration{}
	for _, waiting := range []int{0, 10} {
		l, err := NewLittle(LittleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		now := epoch
		i := 0
		// feed sends samples for d with inFlight(limit) in flight to
		// workers workers, at the throughput that in flight and latency
		// give, until done.
		feed := func(d time.Duration, workers int, inFlight func(int) int, waiting int, done func() bool) {
			for end := now.Add(d); now.Before(end) && !done(); i++ {
				n := inFlight(l.Limit())
				latency := noLoad * time.Duration(max(n, workers)) / time.Duration(workers)
				lat := latency * 8 / 20
				if i%2 == 1 {
					lat = latency * 32 / 20
				}
				now = now.Add(latency / time.Duration(n))
				l.Observe(now, Sample{Latency: lat, InFlight: n, Outcome: sluice.Success, Waiting: waiting})
			}
		}
		never := func() bool { return false }
		atLimit := func(n int) int { return n }
		feed(10*time.Second, 20, func(int) int { return 16 }, 0, never)
		feed(10*time.Second, 10, atLimit, waiting, never)
		if l.Limit() > 13 {
			t.Fatalf("waiting=%d: limit %d after half the workers went, want at most 13", waiting, l.Limit())
		}
		back := now
		feed(time.Minute, 20, atLimit, waiting, func() bool { return l.Limit() >= 16 })
		if l.Limit() < 16 {
			t.Fatalf("waiting=%d: limit %d a minute after the workers came back, want 16", waiting, l.Limit())
		}
		took[waiting] = now.Sub(back)
	}
	t.Logf("back to 16 in %v from the latency alone, %v with requests waiting", took[0], took[10])
	if took[10] > took[0]/6 {
		t.Errorf("with requests waiting the limit took %v to grow back, want at most a sixth of %v", took[10], took[0])
	}
}

// A smoothed limit reaches MaxLimit: healthy and full after a drop, it
// must admit MaxLimit again, not MaxLimit − 1. Smoothing toward a target
// already clamped to MaxLimit only approaches it (99.2, 99.36, ...), and
// rounding stops the approach a few ulps short of it for good at many
// values: with Gradient2's defaults and MaxLimit 2, one drop left a limit
// of 1 for ever, half of what the service was allowed.
func TestSmoothedLimitReachesMaxLimit(t *testing.T) {
	const ms = time.Millisecond
	algs := map[string]func(maxLimit int) (Algorithm, error){
		"gradient2": func(m int) (Algorithm, error) { return NewGradient2(Gradient2Config{MaxLimit: m}) },
		"vegas":     func(m int) (Algorithm, error) { return NewVegas(VegasConfig{MaxLimit: m, Smoothing: 0.3}) },
	}
	for name, build := range algs {
		var stuck []int
		for m := 2; m <= 64; m++ {
			alg, err := build(m)
			if err != nil {
				t.Fatal(err)
			}
			now := epoch
			feed := func(s Sample) { now = now.Add(10 * ms); alg.Observe(now, s) }
			for range 20 {
				feed(ok(10*ms, alg.Limit()))
			}
			feed(drop(10*ms, alg.Limit()))
			feed(drop(10*ms, alg.Limit()))
			for range 500 {
				feed(ok(10*ms, alg.Limit()))
			}
			if alg.Limit() != m {
				stuck = append(stuck, m)
			}
		}
		if len(stuck) > 0 {
			t.Errorf("%s: 500 healthy, full round trips after a drop did not bring the limit back to MaxLimit = %v", name, stuck)
		}
	}
}
