package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

func ExampleNewAIMD() {
	aimd, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: 10})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Healthy and in use: +1 per second.
	for range 3 {
		aimd.Observe(now, adaptive.Sample{Latency: 50 * time.Millisecond, InFlight: 10, Outcome: sluice.Success})
		now = now.Add(time.Second)
	}
	fmt.Println("after 3 healthy seconds:", aimd.Limit())
	// A burst of failures from the same round trip backs off once.
	for range 5 {
		aimd.Observe(now, adaptive.Sample{Latency: 50 * time.Millisecond, InFlight: 13, Outcome: sluice.Dropped})
	}
	fmt.Println("after 5 drops:", aimd.Limit())
	// Output:
	// after 3 healthy seconds: 13
	// after 5 drops: 9
}

func ExampleNewVegas() {
	vegas, err := adaptive.NewVegas(adaptive.VegasConfig{InitialLimit: 10})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A service with room for 50: latency stays at 10ms up to 50 in flight
	// and grows in proportion beyond. Each round trip runs a full limit.
	// Slow start doubles to 80, sees 30 queued, takes them off, and Vegas
	// settles 6 (beta) above the service's 50.
	for range 12 {
		inFlight := vegas.Limit()
		latency := 10 * time.Millisecond * time.Duration(max(inFlight, 50)) / 50
		vegas.Observe(now, adaptive.Sample{Latency: latency, InFlight: inFlight, Outcome: sluice.Success})
		now = now.Add(latency)
		fmt.Print(" ", vegas.Limit())
	}
	fmt.Println()
	fmt.Println("no-load latency:", vegas.NoLoadLatency())
	// Output:
	// 10 20 40 80 50 56 56 56 56 56 56 56
	// no-load latency: 10ms
}

func ExampleNewGradient2() {
	g, err := adaptive.NewGradient2(adaptive.Gradient2Config{InitialLimit: 20})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A service with room for 50: latency is base up to 50 in flight and
	// grows in proportion beyond. Each round trip runs a full limit.
	run := func(base time.Duration, rounds int) {
		for range rounds {
			inFlight := g.Limit()
			latency := base * time.Duration(max(inFlight, 50)) / 50
			g.Observe(now, adaptive.Sample{Latency: latency, InFlight: inFlight, Outcome: sluice.Success})
			now = now.Add(latency)
		}
	}
	run(10*time.Millisecond, 200) // settles at 1.5 × 50: Tolerance's worth of queue
	fmt.Println("settled:", g.Limit(), "long-term latency:", g.LongLatency())
	// The service gets twice as slow: latency rises at a load the baseline
	// was seen at, so it is the service, not this limit's queue.
	run(20*time.Millisecond, 200)
	fmt.Println("after the slowdown:", g.Limit(), "long-term latency:", g.LongLatency().Round(time.Millisecond))
	// Output:
	// settled: 76 long-term latency: 10ms
	// after the slowdown: 76 long-term latency: 20ms
}

// Any of the three fits behind Algorithm. A limit that is not in use does
// not grow: a minute of healthy requests that never reach half the limit
// leaves each at its initial 20.
func ExampleAlgorithm() {
	aimd, _ := adaptive.NewAIMD(adaptive.AIMDConfig{})
	vegas, _ := adaptive.NewVegas(adaptive.VegasConfig{})
	g2, _ := adaptive.NewGradient2(adaptive.Gradient2Config{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, alg := range []adaptive.Algorithm{aimd, vegas, g2} {
		for i := range 600 {
			alg.Observe(now.Add(time.Duration(i)*100*time.Millisecond),
				adaptive.Sample{Latency: 10 * time.Millisecond, InFlight: 5, Outcome: sluice.Success})
		}
		fmt.Printf("%T: %d\n", alg, alg.Limit())
	}
	// Output:
	// *adaptive.AIMD: 20
	// *adaptive.Vegas: 20
	// *adaptive.Gradient2: 20
}

func ExampleNewLittle() {
	little, err := adaptive.NewLittle(adaptive.LittleConfig{})
	if err != nil {
		panic(err)
	}
	// A service with 8 workers and 20 ms of work, saturated: with n in
	// flight every request takes 20 ms × max(1, n/8) (Little's law).
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 5000 {
		n := little.Limit()
		latency := 20 * time.Millisecond * time.Duration(max(n, 8)) / 8
		little.Observe(now, adaptive.Sample{Latency: latency, InFlight: n, Outcome: sluice.Success})
		now = now.Add(latency / time.Duration(n))
	}
	fmt.Println("limit:", little.Limit(), "no-load latency:", little.NoLoadLatency())
	// Output:
	// limit: 9 no-load latency: 20ms
}
