package adaptive

import (
	"testing"
	"time"
)

func TestVegasTransitions(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		cfg   VegasConfig
		steps []step
	}{
		{"slow start, then the queue regimes", VegasConfig{InitialLimit: 10}, []step{
			{0, ok(10*ms, 10), 10},          // opens a round trip of 10ms
			{10 * ms, ok(10*ms, 10), 20},    // closes it: noLoad 10ms, queue 0: double
			{15 * ms, ok(10*ms, 20), 20},    // within the round trip: no move
			{20 * ms, ok(10*ms, 20), 40},    // double again
			{30 * ms, ok(20*ms, 40), 20},    // queue 40×(1−10/20) = 20: slow start ends, 40 − 20
			{50 * ms, ok(15*ms, 20), 19},    // queue ceil(6.7) = 7 > beta 6: −1
			{65 * ms, ok(12*ms, 19), 19},    // queue 4, within [alpha 3, beta 6]: hold
			{77 * ms, ok(11*ms, 19), 20},    // queue 2 < alpha: +1
			{88 * ms, ok(10*ms, 20), 26},    // queue 0 <= threshold 1: +beta
			{98 * ms, ok(10*ms, 12), 26},    // 12 in flight < 26/2: the limit is not in use
			{108 * ms, drop(10*ms, 26), 23}, // a drop: × 0.9 = 23.4
		}},
		{"slow start doubles only a full limit", VegasConfig{InitialLimit: 10}, []step{
			{0, ok(10*ms, 8), 10},
			{10 * ms, ok(10*ms, 8), 10},
			{20 * ms, ok(10*ms, 10), 20},
		}},
		{"smoothing, no slow start", VegasConfig{InitialLimit: 10, Smoothing: 0.5, NoSlowStart: true}, []step{
			{0, ok(10*ms, 10), 10},
			{10 * ms, ok(10*ms, 10), 13}, // 10 + (16 − 10) × 0.5
		}},
		{"log10 steps above 100", VegasConfig{InitialLimit: 200, NoSlowStart: true}, []step{
			{0, ok(10*ms, 200), 200},
			{10 * ms, ok(10*ms, 200), 212},                  // +beta = 6 × 2
			{20 * ms, ok(10500*time.Microsecond, 212), 212}, // queue 11 in [6, 12]
			{31 * ms, ok(11*ms, 212), 210},                  // queue 20 > 12: −2
		}},
		{"clamped to max", VegasConfig{InitialLimit: 10, MaxLimit: 15}, []step{
			{0, ok(10*ms, 10), 10},
			{10 * ms, ok(10*ms, 10), 15},
		}},
		{"drops in one round trip cost one backoff", VegasConfig{InitialLimit: 30}, []step{
			{0, drop(10*ms, 30), 30},
			{5 * ms, drop(10*ms, 30), 30},
			{10 * ms, drop(10*ms, 30), 27},
		}},
		{"a drop takes at least one step off", VegasConfig{InitialLimit: 5}, []step{
			{0, drop(10*ms, 5), 5},
			{10 * ms, drop(10*ms, 5), 4}, // 5 × 0.9 = 4.5; one step off is 4
		}},
		{"a drop that started before the last backoff is answered", VegasConfig{InitialLimit: 30}, []step{
			{0, drop(10*ms, 30), 30},
			{10 * ms, drop(10*ms, 30), 27},  // backoff at 10ms
			{15 * ms, drop(100*ms, 27), 27}, // started at -85ms: ignored
			{20 * ms, ok(10*ms, 27), 33},    // a round trip without drops: queue 0, + beta
			{25 * ms, drop(3*ms, 33), 33},   // started at 22ms, after the backoff
			{30 * ms, ok(10*ms, 33), 29},    // counts: × 0.9 = 29.7
		}},
		{"Backoff 1 is Netflix's one step", VegasConfig{InitialLimit: 30, Backoff: 1}, []step{
			{0, drop(10*ms, 30), 30},
			{10 * ms, drop(10*ms, 30), 29},
		}},
		{"a success slower than Timeout is a drop", VegasConfig{InitialLimit: 30, NoSlowStart: true, Timeout: 50 * ms}, []step{
			{0, ok(50*ms, 30), 30},        // at the timeout: a success (noLoad 50ms)
			{50 * ms, ok(50*ms, 30), 36},  // queue 0: + beta
			{100 * ms, ok(51*ms, 36), 32}, // over it: × 0.9 = 32.4
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVegas(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			replay(t, v, tt.steps)
		})
	}
}

func TestVegasNoLoadEstimate(t *testing.T) {
	const ms = time.Millisecond
	sec := time.Second
	m := noLoadMin{window: 10 * sec}
	steps := []struct {
		at       time.Duration
		lat      time.Duration
		inFlight int
		want     time.Duration
	}{
		{0, 10 * ms, 5, 10 * ms},
		{1 * sec, 30 * ms, 50, 10 * ms},                  // slower, but at ten times the load
		{11 * sec, 30 * ms, 50, 10 * ms},                 // a window of that: still no evidence
		{12 * sec, 20 * ms, 5, 10 * ms},                  // slower at comparable load
		{21 * sec, 25 * ms, 4, 22500 * time.Microsecond}, // for a whole window: re-learned as their mean
		{22 * sec, 15 * ms, 30, 15 * ms},                 // faster: believed at once
		{23 * sec, 18 * ms, 30, 15 * ms},
	}
	for i, st := range steps {
		m.observe(epoch.Add(st.at), float64(st.lat), 1, st.inFlight)
		if got := time.Duration(m.est); got != st.want {
			t.Fatalf("step %d: estimate %v, want %v", i, got, st.want)
		}
	}
	if m.seenAt != 30 {
		t.Fatalf("seenAt = %d, want 30", m.seenAt)
	}
}

// The estimate is a minimum over evidence of at least minEvidence
// requests: single requests of a noisy service, whose fastest are a
// fraction of its mean, do not drag it down to its fastest request.
func TestVegasNoLoadPoolsNoisyEvidence(t *testing.T) {
	const ms = time.Millisecond
	m := noLoadMin{window: 10 * time.Second}
	at := time.Duration(0)
	feed := func(lat time.Duration, times int) {
		for range times {
			m.pool(epoch.Add(at), float64(lat), 1, 5)
			at += ms
		}
	}
	feed(10*ms, 1)
	if got := time.Duration(m.est); got != 10*ms {
		t.Fatalf("first sample: estimate %v, want 10ms", got)
	}
	for range 10 * minEvidence { // a noisy service: 5ms or 35ms, 20ms on average
		feed(5*ms, 1)
		feed(35*ms, 1)
	}
	if got := time.Duration(m.est); got != 10*ms {
		t.Fatalf("after noisy samples averaging 20ms: estimate %v, want the first 10ms (no lower whole evidence)", got)
	}
	feed(8*ms, minEvidence-1) // not yet whole evidence
	if got := time.Duration(m.est); got != 10*ms {
		t.Fatalf("after %d fast samples: estimate %v, want still 10ms", minEvidence-1, got)
	}
	feed(8*ms, 1)
	if got := time.Duration(m.est); got != 8*ms {
		t.Fatalf("after %d fast samples: estimate %v, want 8ms", minEvidence, got)
	}
}

// Slow start doubles a limit that was full, and a limit of 22.5 (Smoothing
// 0.5 takes 15 half way to 30) admits 22: 22 in flight is full. Compared
// as floats, 22 < 22.5 read as not full, and Vegas held 22 forever against
// a service that could take any number, neither doubling nor, still in
// slow start, taking the +beta step.
func TestVegasSlowStartFullAtAFractionalLimit(t *testing.T) {
	v, err := NewVegas(VegasConfig{InitialLimit: 10, Smoothing: 0.5, MaxLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	m := model{Base: 10 * time.Millisecond, Capacity: 1 << 20, Seed: 1}
	if r := m.drive(v, 10*time.Second); r.minLimit != 100 {
		t.Fatalf("limit in [%d, %d] over the second half of 10s of a healthy service, want 100", r.minLimit, r.maxLimit)
	}
}

// The no-load evidence of a round trip is the successes near the fewest
// in flight counted from the one that lowered it: those before it are
// dropped, even when near it (see Vegas for why). Here three of 100ms at
// 10 in flight, then 160ms at 9: the evidence is 160ms and the closing
// 100ms at 10, 130ms; keeping the earlier three would make it 112ms.
func TestVegasLeastLoadedCountsFromTheFewest(t *testing.T) {
	const ms = time.Millisecond
	v, err := NewVegas(VegasConfig{InitialLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		at time.Duration
		s  Sample
	}{
		{0, ok(100*ms, 10)}, // opens a round trip of 100ms
		{10 * ms, ok(100*ms, 10)},
		{20 * ms, ok(100*ms, 10)},
		{30 * ms, ok(160*ms, 9)},   // the fewest: 10 is near 9 (at most 9+9/8+1), but came before
		{40 * ms, ok(300*ms, 20)},  // not near 9: not evidence
		{100 * ms, ok(100*ms, 10)}, // near 9, after it: evidence; closes the round trip
	} {
		v.Observe(epoch.Add(st.at), st.s)
	}
	if got, want := v.NoLoadLatency(), 130*ms; got != want {
		t.Fatalf("no-load latency %v, want %v: the mean of the successes near the fewest in flight from it on", got, want)
	}
}
