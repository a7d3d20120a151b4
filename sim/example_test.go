package sim_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/sim"
)

// Seed 003's slowdown: the origin's work goes from 1 s to 2 s, its capacity
// from 7 to 3.5 rps. Without a limit every request times out; a static
// limit of 5 in flight keeps 2.2 rps of goodput (a slot freed at the instant
// a request is due idles until the next, 200 ms later: 5 / 2.2 s, of which
// the window [60 s, 120 s) holds 135 answers).
func ExampleRun() {
	s := sim.Scenario{
		Name: "slowdown", Duration: 120 * time.Second, Warmup: 60 * time.Second,
		Origin: sim.Origin{
			Workers: 7, Queue: 100, Service: sim.Dist{Kind: sim.Constant, Mean: time.Second},
			Changes: []sim.Change{{At: 30 * time.Second, Service: sim.Dist{Kind: sim.Constant, Mean: 2 * time.Second}}},
		},
		Load: sim.Load{Rate: 5, Timeout: 2500 * time.Millisecond, ClientWorkers: 10},
		Policies: []sim.Policy{
			sim.NonePolicy{Name: "none"},
			sim.ConcurrencyPolicy{Name: "static-5", Limit: 5},
		},
	}
	res, err := sim.Run(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range res.Policies {
		fmt.Printf("%s: goodput %.1f rps of %.1f\n", p.Name, p.Summary.Goodput, p.Summary.Capacity)
	}
	// Output:
	// none: goodput 0.0 rps of 3.5
	// static-5: goodput 2.2 rps of 3.5
}

// Validation names the field at fault, as a scenario file spells it.
func ExampleScenario_Validate() {
	s := sim.Scenario{
		Duration: time.Minute,
		Origin:   sim.Origin{Workers: 4, Service: sim.Dist{Kind: sim.Constant, Mean: time.Millisecond}},
		Load:     sim.Load{Rate: 100},
		Policies: []sim.Policy{sim.ConcurrencyPolicy{}},
	}
	err := s.Validate()
	var fe *sim.FieldError
	fmt.Println(errors.Is(err, sim.ErrInvalid), errors.As(err, &fe) && fe.Field == "policies[0].limit")
	fmt.Println(err)
	// Output:
	// true true
	// sim: policies[0].limit: must be > 0 for a concurrency policy, got 0
}

// Seed 001's bursts: 200 requests every 500 ms at a limit of 50 with a
// queue of 200. LIFO serves the newest waiters first, so more of them are
// served within a second than with FIFO.
func ExamplePolicyResult_AdmittedWithin() {
	s := sim.Scenario{
		Seed: 1, Duration: 15 * time.Second,
		Origin: sim.Origin{Workers: 1000, Service: sim.Dist{Kind: sim.Exponential, Mean: 500 * time.Millisecond}},
		Load:   sim.Load{Bursts: sim.Bursts{Size: 200, Every: 500 * time.Millisecond, Count: 5}},
		Policies: []sim.Policy{
			sim.ConcurrencyPolicy{Name: "fifo", Limit: 50, QueueConfig: sim.QueueConfig{Queue: 200}},
			sim.ConcurrencyPolicy{Name: "lifo", Limit: 50, QueueConfig: sim.QueueConfig{Queue: 200, Discipline: concurrency.LIFO}},
		},
	}
	res, err := sim.Run(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fifo, lifo := &res.Policies[0], &res.Policies[1]
	fmt.Println(lifo.AdmittedWithin(time.Second) > fifo.AdmittedWithin(time.Second))
	// Output:
	// true
}

// RunPolicy runs one policy of a scenario, so that a caller can run
// several in parallel; the result is the same as Run's.
func ExampleRunPolicy() {
	s := sim.Scenario{
		Duration: 10 * time.Second,
		Origin:   sim.Origin{Workers: 2, Service: sim.Dist{Kind: sim.Constant, Mean: 100 * time.Millisecond}},
		Load:     sim.Load{Rate: 30},
		Policies: []sim.Policy{sim.NonePolicy{}, sim.TokenBucketPolicy{Rate: 10, Burst: 1}},
	}
	p, err := sim.RunPolicy(s, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %.0f successes/s, %d rejected for %s\n", p.Name, p.Summary.Goodput, p.Summary.Rejects["rate"], "rate")
	fmt.Println(p.SucceededWithin(100*time.Millisecond) == p.Summary.Successes)
	// Output:
	// token-bucket: 10 successes/s, 200 rejected for rate
	// true
}

// A tenth of the requests take the slow path (bimodal service: 10 ms, or
// 200 ms with probability 0.1): SucceededWithin counts the fast ones.
func ExamplePolicyResult_SucceededWithin() {
	s := sim.Scenario{
		Seed: 1, Duration: 10 * time.Second,
		Origin: sim.Origin{Workers: 100, Service: sim.Dist{Kind: sim.Bimodal, Mean: 10 * time.Millisecond,
			Tail: 200 * time.Millisecond, TailFraction: 0.1}},
		Load:     sim.Load{Rate: 100},
		Policies: []sim.Policy{sim.NonePolicy{}},
	}
	res, err := sim.Run(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := &res.Policies[0]
	fmt.Printf("%d of %d within 50 ms\n", p.SucceededWithin(50*time.Millisecond), p.Summary.Successes)
	// Output:
	// 908 of 998 within 50 ms
}

// Arrivals are the send times of a Load's rate: here 2 per second, then
// 4 per second from t = 1 s. sluice load sends at these times to a real
// server.
func ExampleArrivals() {
	arr := sim.NewArrivals(&sim.Load{Rate: 2, Steps: []sim.Step{{At: time.Second, Rate: 4}}})
	for range 6 {
		t, _ := arr.Next(nil) // constant arrivals draw nothing
		fmt.Printf("%.2fs ", t)
	}
	fmt.Println()
	// Output: 0.00s 0.50s 1.00s 1.25s 1.50s 1.75s
}

// The simulator's origin draws service times from a Sampler fed by
// ServiceRand; sluice origin draws from the same, in the same order. A
// bimodal Dist's Mean is its fast mode; Sampler.Mean is the true mean.
func ExampleNewSampler() {
	s := sim.NewSampler(sim.Dist{Kind: sim.Bimodal, Mean: 10 * time.Millisecond, Tail: 200 * time.Millisecond, TailFraction: 0.1})
	rng := sim.ServiceRand(1)
	var sum time.Duration
	const n = 100_000
	for range n {
		sum += s.Draw(rng)
	}
	fmt.Println(s.Mean(), (sum / n).Round(time.Millisecond))
	// Output: 29ms 29ms
}

// ArrivalRand is the random source of a scenario's Poisson arrivals: the
// same seed gives the simulator's send times, which sluice load plays.
func ExampleArrivalRand() {
	arr := sim.NewArrivals(&sim.Load{Arrivals: sim.PoissonArrivals, Rate: 100})
	rng := sim.ArrivalRand(1)
	n := 0
	for t, ok := arr.Next(rng); ok && t < 10; t, ok = arr.Next(rng) {
		n++
	}
	fmt.Printf("%d sends in 10 s at 100 per second\n", n)
	// Output: 986 sends in 10 s at 100 per second
}
