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
	observe := func(latency time.Duration, rounds int) {
		for range rounds {
			g.Observe(now, adaptive.Sample{Latency: latency, InFlight: g.Limit(), Outcome: sluice.Success})
			now = now.Add(latency)
		}
	}
	observe(10*time.Millisecond, 20) // steady: the limit grows 0.8 per round trip
	fmt.Println("steady:", g.Limit())
	observe(40*time.Millisecond, 10) // four times slower: it shrinks
	fmt.Println("slow:", g.Limit())
	observe(40*time.Millisecond, 300) // the long-term average catches up, growth resumes
	fmt.Println("later:", g.Limit(), "long-term latency:", g.LongLatency().Round(time.Millisecond))
	// Output:
	// steady: 35
	// slow: 12
	// later: 53 long-term latency: 28ms
}
