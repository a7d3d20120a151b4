package adaptive

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// step is one sample fed at epoch+at, and the limit expected after it.
type step struct {
	at   time.Duration
	s    Sample
	want int
}

func ok(lat time.Duration, inFlight int) Sample {
	return Sample{Latency: lat, InFlight: inFlight, Outcome: sluice.Success}
}

func drop(lat time.Duration, inFlight int) Sample {
	return Sample{Latency: lat, InFlight: inFlight, Outcome: sluice.Dropped}
}

func replay(t *testing.T, alg Algorithm, steps []step) {
	t.Helper()
	for i, st := range steps {
		if got := alg.Observe(epoch.Add(st.at), st.s); got != st.want {
			t.Fatalf("step %d (t=%v, %+v): limit %d, want %d", i, st.at, st.s, got, st.want)
		}
		if got := alg.Limit(); got != st.want {
			t.Fatalf("step %d: Limit() = %d, Observe returned %d", i, got, st.want)
		}
	}
}

func TestAIMDTransitions(t *testing.T) {
	const ms = time.Millisecond
	sec := time.Second
	tests := []struct {
		name  string
		cfg   AIMDConfig
		steps []step
	}{
		{"increase once per interval while used", AIMDConfig{InitialLimit: 10}, []step{
			{0, ok(50*ms, 5), 11}, // first healthy, used sample
			{500 * ms, ok(50*ms, 11), 11},
			{999 * ms, ok(50*ms, 11), 11},
			{sec, ok(50*ms, 11), 12},
			{2 * sec, ok(50*ms, 6), 13}, // 6*2 >= 12: used
		}},
		{"no increase while the limit is not in use", AIMDConfig{InitialLimit: 10}, []step{
			{0, ok(50*ms, 4), 10},
			{5 * sec, ok(50*ms, 4), 10},
			{6 * sec, ok(50*ms, 5), 11},
		}},
		{"drop backs off", AIMDConfig{InitialLimit: 20}, []step{
			{0, drop(50*ms, 20), 15},
			{2 * sec, drop(50*ms, 15), 11}, // 15 × 0.75 = 11.25
		}},
		{"a burst of drops backs off once", AIMDConfig{InitialLimit: 20}, []step{
			{0, drop(50*ms, 20), 15},
			{1 * ms, drop(50*ms, 20), 15},
			{2 * ms, drop(0, 20), 15},
			{30 * ms, drop(50*ms, 20), 15},
		}},
		{"a drop after the interval that started before the backoff is ignored", AIMDConfig{InitialLimit: 20}, []step{
			{0, drop(50*ms, 20), 15},
			{1500 * ms, drop(2*sec, 20), 15}, // started at -0.5s
			{1600 * ms, drop(100*ms, 15), 11},
		}},
		{"increase waits an interval after a backoff", AIMDConfig{InitialLimit: 20}, []step{
			{0, drop(50*ms, 20), 15},
			{500 * ms, ok(50*ms, 15), 15},
			{sec, ok(50*ms, 15), 16},
		}},
		{"timeout is an overload signal", AIMDConfig{InitialLimit: 20, Timeout: 100 * ms}, []step{
			{0, ok(100*ms, 20), 21}, // at the timeout: still healthy
			{sec, ok(101*ms, 20), 15},
		}},
		{"custom increase, interval and backoff", AIMDConfig{InitialLimit: 10, Increase: 5, Interval: 100 * ms, Backoff: 0.5}, []step{
			{0, ok(10*ms, 10), 15},
			{100 * ms, ok(10*ms, 10), 20},
			{150 * ms, drop(10*ms, 20), 10},
		}},
		{"an increase needs a success that started after the last change", AIMDConfig{InitialLimit: 10}, []step{
			{0, ok(50*ms, 10), 11},
			{sec, ok(2*sec, 11), 11}, // started at -1s: it saw the old limit
			{2500 * ms, ok(2*sec, 11), 12},
		}},
		{"a backoff takes at least one permit away", AIMDConfig{InitialLimit: 8, Backoff: 0.9}, []step{
			{0, drop(10*ms, 8), 7}, // 8 × 0.9 = 7.2 would still admit 7... and 8.2 next
			{sec, ok(10*ms, 7), 8},
			{2 * sec, drop(10*ms, 8), 7},
		}},
		{"probing the level that failed waits 2^k intervals", AIMDConfig{InitialLimit: 8, Backoff: 0.9}, []step{
			{0, drop(10*ms, 8), 7},
			{sec, ok(10*ms, 7), 8}, // first failure at 8: one interval
			{1500 * ms, drop(10*ms, 8), 7},
			{2500 * ms, ok(10*ms, 7), 7}, // second: two intervals
			{3500 * ms, ok(10*ms, 7), 8},
			{3600 * ms, drop(10*ms, 8), 7},
			{7500 * ms, ok(10*ms, 7), 7}, // third: four intervals
			{7600 * ms, ok(10*ms, 7), 8},
			{10 * sec, ok(10*ms, 8), 8},    // past it: the level must hold four intervals too
			{11600 * ms, ok(10*ms, 8), 9},  // it held: forgotten
			{12600 * ms, ok(10*ms, 9), 10}, // one interval again
		}},
		{"the probe wait stops doubling at 16 intervals", AIMDConfig{InitialLimit: 2, MaxLimit: 2, Backoff: 0.5}, []step{
			{0, drop(10*ms, 2), 1},
			{sec, ok(10*ms, 1), 2},
			{2 * sec, drop(10*ms, 2), 1},
			{4 * sec, ok(10*ms, 1), 2},
			{5 * sec, drop(10*ms, 2), 1},
			{9 * sec, ok(10*ms, 1), 2},
			{10 * sec, drop(10*ms, 2), 1},
			{18 * sec, ok(10*ms, 1), 2},
			{19 * sec, drop(10*ms, 2), 1},
			{35 * sec, ok(10*ms, 1), 2},
			{36 * sec, drop(10*ms, 2), 1},
			{51900 * ms, ok(10*ms, 1), 1},
			{52 * sec, ok(10*ms, 1), 2}, // 16 s, not 32
		}},
		{"a success twice as fast as the failure forgets the level", AIMDConfig{InitialLimit: 8, Backoff: 0.9}, []step{
			{0, drop(400*ms, 8), 7},
			{sec, ok(300*ms, 7), 8},
			{2 * sec, drop(400*ms, 8), 7},
			{3 * sec, ok(300*ms, 7), 7},   // 300ms: the same service, wait two intervals
			{3500 * ms, ok(150*ms, 7), 8}, // 150ms: a faster service, probe now
		}},
		{"clamped to min and max", AIMDConfig{InitialLimit: 3, MinLimit: 2, MaxLimit: 4}, []step{
			{0, ok(10*ms, 3), 4},
			{sec, ok(10*ms, 4), 4},
			{2 * sec, drop(10*ms, 4), 3},
			{3 * sec, drop(10*ms, 3), 2},
			{4 * sec, drop(10*ms, 2), 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAIMD(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			replay(t, a, tt.steps)
		})
	}
}

// A burst of fast failures (a downstream rejecting at once) over 2.5s backs
// off once per interval: three times, not 250.
func TestAIMDDropBurstBacksOffOncePerInterval(t *testing.T) {
	a, err := NewAIMD(AIMDConfig{InitialLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	cuts := 0
	last := a.Limit()
	for at := time.Duration(0); at < 2500*time.Millisecond; at += 10 * time.Millisecond {
		if l := a.Observe(epoch.Add(at), drop(0, 100)); l < last {
			cuts++
			last = l
		}
	}
	if cuts != 3 || last != 42 { // 100 × 0.75³ = 42.2
		t.Fatalf("%d backoffs to %d, want 3 to 42", cuts, last)
	}
}

// The wait before probing a level that keeps failing doubles per failure
// and saturates rather than wrap: with an Interval of 2^62 ns (146 years),
// a second backoff made it 2^63, which wrapped negative, and the next
// Success 2 ms later raised the limit at once.
func TestAIMDProbeWaitSaturates(t *testing.T) {
	const year = 365 * 24 * time.Hour
	a, err := NewAIMD(AIMDConfig{Interval: 1 << 62, Increase: 10})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, a, []step{
		{-147 * year, drop(time.Millisecond, 20), 15},        // 20 × 0.75
		{0, drop(time.Millisecond, 20), 11},                  // an Interval later, at or below the level that failed
		{2 * time.Millisecond, ok(time.Millisecond, 20), 11}, // the probe waits 2 Intervals, saturated
		{200 * year, ok(time.Millisecond, 20), 11},           // more than one Interval is not enough
	})
	if w := a.wait(); w != math.MaxInt64 {
		t.Errorf("wait = %v, want the longest Duration", w)
	}
}
