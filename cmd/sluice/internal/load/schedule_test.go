package load

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

func times(l sim.Load, until time.Duration) []time.Duration {
	s := newSchedule(l, 1)
	var out []time.Duration
	for {
		t, ok := s.Next()
		if !ok || t >= until {
			return out
		}
		out = append(out, t)
	}
}

func TestScheduleConstant(t *testing.T) {
	got := times(sim.Load{Rate: 10}, time.Second)
	if len(got) != 10 {
		t.Fatalf("10/s for 1s: %d sends", len(got))
	}
	for i, at := range got {
		if want := time.Duration(i) * 100 * time.Millisecond; at != want {
			t.Errorf("send %d at %v, want %v", i, at, want)
		}
	}
}

func TestScheduleSteps(t *testing.T) {
	got := times(sim.Load{Rate: 10, Steps: []sim.Step{{At: time.Second, Rate: 100}, {At: 2 * time.Second, Rate: 0}}}, 10*time.Second)
	if len(got) != 110 {
		t.Errorf("10/s then 100/s for a second each, then 0: %d sends, want 110", len(got))
	}
}

func TestScheduleRamp(t *testing.T) {
	// 0 → 200/s over 10 s: the integral is 1000.
	got := times(sim.Load{Rate: 0, Ramp: true, Steps: []sim.Step{{At: 10 * time.Second, Rate: 200}}}, 10*time.Second)
	if n := len(got); n < 999 || n > 1000 {
		t.Errorf("ramp 0 → 200/s over 10s: %d sends, want 1000", n)
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("out of order at %d: %v after %v", i, got[i], got[i-1])
		}
	}
}

func TestSchedulePoisson(t *testing.T) {
	got := times(sim.Load{Arrivals: sim.PoissonArrivals, Rate: 1000}, 10*time.Second)
	// 10,000 expected; the standard deviation is 100.
	if n := len(got); n < 9600 || n > 10400 {
		t.Errorf("Poisson 1000/s for 10s: %d sends", n)
	}
}

func TestScheduleBursts(t *testing.T) {
	l := sim.Load{Rate: 1, Bursts: sim.Bursts{Size: 3, Count: 2, Every: 500 * time.Millisecond, At: 250 * time.Millisecond}}
	got := times(l, 2*time.Second)
	ms := time.Millisecond
	want := []time.Duration{0, 250 * ms, 250 * ms, 250 * ms, 750 * ms, 750 * ms, 750 * ms, time.Second}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestScheduleEndsPastLongestDuration: a send time past the longest
// time.Duration comes after any run's end, and ends the schedule. It came
// out negative, before the start: sent at once, again and again, so a 1 s
// run at 1e-12/s never ended.
func TestScheduleEndsPastLongestDuration(t *testing.T) {
	for _, l := range []sim.Load{
		{Rate: 1e-12},
		{Rate: 1e-12, Arrivals: sim.PoissonArrivals},
		{Bursts: sim.Bursts{Size: 1, Count: 3, At: time.Hour, Every: math.MaxInt64}},
	} {
		s := newSchedule(l, 1)
		var got []time.Duration
		for range 10 { // the old schedule never ended
			at, ok := s.Next()
			if !ok || at >= 24*time.Hour {
				break
			}
			got = append(got, at)
		}
		if len(got) > 1 || (len(got) == 1 && got[0] < 0) {
			t.Errorf("rate %v, bursts %+v: sends in the first day at %v; want at most one, not before the start", l.Rate, l.Bursts, got)
		}
	}
}

// TestScheduleIsTheSimulators: with a scenario's seed (0 included, seed
// 000's) the schedule sends what the simulator does, interval by interval.
func TestScheduleIsTheSimulators(t *testing.T) {
	const width, n = 100 * time.Millisecond, 50
	l := sim.Load{Arrivals: sim.PoissonArrivals, Rate: 100, Ramp: true, Steps: []sim.Step{{At: n * width, Rate: 600}}}
	for _, seed := range []uint64{0, 7} {
		res, err := sim.Run(sim.Scenario{Seed: seed, Duration: n * width, Interval: width, Load: l,
			Origin:   sim.Origin{Workers: 1000, Service: sim.Dist{Kind: sim.Constant, Mean: time.Millisecond}},
			Policies: []sim.Policy{sim.NonePolicy{}}})
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, n)
		s := newSchedule(l, seed)
		for {
			at, ok := s.Next()
			if !ok || at >= n*width {
				break
			}
			counts[at/width]++
		}
		for i, p := range res.Policies[0].Series {
			if got := int(math.Round(p.Offered * width.Seconds())); got != counts[i] {
				t.Errorf("seed %d, interval %d: the simulator sent %d, the schedule %d", seed, i, got, counts[i])
			}
		}
	}
}
