package adaptive

import (
	"testing"
	"time"
)

func TestGradient2Transitions(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 20})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, g, []step{
		{0, ok(10*ms, 20), 20},       // opens a round trip of 10ms
		{10 * ms, ok(10*ms, 20), 20}, // gradient 1: 20 + 0.2 × 4 = 20.8
		{20 * ms, ok(10*ms, 20), 21}, // 21.6
		// long = 15ms, short = 30ms: gradient 1.5 × 15/30 = 0.75, and no
		// queue term: 21.6 × 0.8 + 16.2 × 0.2 = 20.52
		{30 * ms, ok(30*ms, 21), 20},
		{60 * ms, drop(30*ms, 20), 18}, // gradient 0.5: 18.468
		{90 * ms, ok(10*ms, 5), 18},    // 5 in flight < 18/2: not in use
		// long 12.5ms > 2 × short 5ms: long decays 5% to 11.875ms;
		// gradient 1: 18.468 × 0.8 + 22.468 × 0.2 = 19.268
		{100 * ms, ok(5*ms, 18), 19},
	})
	if got, want := g.LongLatency(), 11875*time.Microsecond; got != want {
		t.Fatalf("LongLatency = %v, want %v", got, want)
	}
}

// The long-term latency learns from samples at concurrency where it is
// known to hold, not from the queue the limit let in.
func TestGradient2BaselineDoesNotLearnTheQueue(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 20, MaxLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	for range 10 { // warm-up at up to 20 in flight
		g.Observe(epoch.Add(at), ok(10*ms, 20))
		at += 10 * ms
	}
	base := g.LongLatency()
	for range 1000 { // a long overload at 50 in flight
		g.Observe(epoch.Add(at), ok(25*ms, 50))
		at += ms
	}
	if got := g.LongLatency(); got != base {
		t.Fatalf("long latency moved from %v to %v on queued samples", base, got)
	}
	for range 1000 { // the service slowed: slower at 15 in flight
		g.Observe(epoch.Add(at), ok(25*ms, 15))
		at += ms
	}
	if got := g.LongLatency(); got < 20*ms {
		t.Fatalf("long latency %v did not follow a slowdown at comparable load", got)
	}
}

// A success slower than Timeout is a drop: the gradient is 0.5.
func TestGradient2Timeout(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 20, Timeout: 15 * ms})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, g, []step{
		{0, ok(10*ms, 20), 20},
		{10 * ms, ok(15*ms, 20), 20}, // at the timeout: a success, 20.8
		{25 * ms, ok(16*ms, 20), 18}, // over it: 20.8 × 0.8 + 10.4 × 0.2 = 18.72
	})
}

// One slow round trip of a noisy service is not a slowdown: long moves
// only once 32 successes at known load, in consecutive round trips, are
// beyond tolerance, and then takes their mean.
func TestGradient2SlowdownNeedsPooledEvidence(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 20})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	feed := func(n int, lat time.Duration) {
		for range n {
			g.Observe(epoch.Add(at), ok(lat, 10))
			at += ms
		}
	}
	feed(30, 10*ms) // long = 10ms, known to hold at 10 in flight
	for _, c := range []struct {
		n         int
		lat       time.Duration
		atLeast   time.Duration
		atMost    time.Duration
		rationale string
	}{
		{20, 20 * ms, 10 * ms, 12 * ms, "one or two slow round trips: long only averages them in"},
		{30, 10 * ms, 10 * ms, 12 * ms, "back within tolerance: the count starts again"},
		{20, 20 * ms, 10 * ms, 13 * ms, "20 more are still fewer than 32"},
		{60, 20 * ms, 19 * ms, 21 * ms, "32 in consecutive round trips: long takes their mean"},
	} {
		feed(c.n, c.lat)
		if got := g.LongLatency(); got < c.atLeast || got > c.atMost {
			t.Fatalf("after %d samples of %v: long %v, want within [%v, %v] (%s)", c.n, c.lat, got, c.atLeast, c.atMost, c.rationale)
		}
	}
}

// The concurrency at which long is known to hold rises with round trips
// that come in under long, but not past limit / Tolerance: saturated, that
// is where latency is long (Little's law). A lucky round trip at a queued
// concurrency must not make its queue known load.
func TestGradient2KnownLoadCappedByLimit(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 30, MaxLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Duration(0)
	for range 10 { // warm-up at 5 in flight
		g.Observe(epoch.Add(at), ok(10*ms, 5))
		at += ms
	}
	for range 200 { // within long at 60 in flight
		g.Observe(epoch.Add(at), ok(9*ms, 60))
		at += ms
	}
	if most := int(float64(g.Limit()) / 1.5); g.seenAt > most || g.seenAt <= 5 {
		t.Fatalf("known load %d with limit %d, want within (5, %d]", g.seenAt, g.Limit(), most)
	}
}

// long's known-load evidence is every success of the round trip that
// started at seenAt in flight or below, whatever the order: one that
// started with fewer in flight does not discard those before it.
func TestGradient2KnownEvidenceKeepsEarlierSamples(t *testing.T) {
	const ms = time.Millisecond
	g, err := NewGradient2(Gradient2Config{InitialLimit: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, 1, 2, 3, 4, 5, 6, 7, 8, 10} {
		g.Observe(epoch.Add(at*ms), ok(10*ms, 10)) // warm-up; the 10th closes the round trip
	}
	if g.seenAt != 10 {
		t.Fatalf("seenAt %d after warm-up at 10 in flight, want 10", g.seenAt)
	}
	for _, st := range []struct {
		at time.Duration
		s  Sample
	}{
		{11 * ms, ok(20*ms, 10)},
		{12 * ms, ok(20*ms, 10)},
		{13 * ms, ok(20*ms, 10)},
		{14 * ms, ok(20*ms, 5)},  // fewer in flight
		{20 * ms, ok(20*ms, 10)}, // closes the round trip
	} {
		g.Observe(epoch.Add(st.at), st.s)
	}
	if g.slow.n != 5 {
		t.Fatalf("slow evidence %d successes, want all 5 of the round trip (each at most seenAt 10 in flight)", g.slow.n)
	}
}
