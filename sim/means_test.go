package sim

import (
	"math"
	"testing"
	"time"
)

// TestMeansAndDemand: three requests sent at once to one worker that takes
// 1 s each wait 0, 1 and 2 s before service, wherever they wait (the
// origin's queue behind no limit, or the policy's queue behind a limit of
// 1), and succeed after 1, 2 and 3 s. (Less a nanosecond: a burst's
// requests arrive a nanosecond apart, in order.)
func TestMeansAndDemand(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: time.Second}},
		Load:     Load{Bursts: Bursts{Size: 3, Count: 1}},
		Policies: []Policy{
			NonePolicy{Name: "origin-queue"},
			ConcurrencyPolicy{Name: "policy-queue", Limit: 1, QueueConfig: QueueConfig{Queue: Unbounded}},
		},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range res.Policies {
		sm := pr.Summary
		if sm.MeanWait != time.Second-time.Nanosecond || sm.MeanLatency != 2*time.Second-time.Nanosecond {
			t.Errorf("%s: mean wait %v, mean latency %v; want 1s and 2s", pr.Name, sm.MeanWait, sm.MeanLatency)
		}
		if sm.Demand != 0.3 { // 3 requests in 10 s
			t.Errorf("%s: demand %v, want 0.3", pr.Name, sm.Demand)
		}
		if pr.Series[0].Demand != 3 || pr.Series[1].Demand != 0 {
			t.Errorf("%s: demand series %v, %v; want 3, 0", pr.Name, pr.Series[0].Demand, pr.Series[1].Demand)
		}
	}
}

// TestDemandExcludesRetriesIncludesUnsent: retries are not demand; a
// request the clients could not send for want of a worker is.
func TestDemandExcludesRetriesIncludesUnsent(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: time.Second}},
		Load:     Load{Rate: 10, ClientWorkers: 5, Retries: Retries{Max: 2, Backoff: 2 * time.Second}},
		Policies: []Policy{ConcurrencyPolicy{Limit: 1}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	sm := res.Policies[0].Summary
	if sm.Retries == 0 || sm.Unsent == 0 {
		t.Fatalf("the scenario should retry and leave requests unsent: %+v", sm)
	}
	if sm.Demand != 10 {
		t.Errorf("demand %v, want the 10 rps offered", sm.Demand)
	}
}

// TestPointCapacityIsIntervalMean: a point's capacity is the mean over its
// interval, so an interval that ends at a change, or holds one, is not
// given the new capacity for all of it.
func TestPointCapacityIsIntervalMean(t *testing.T) {
	s := Scenario{
		Duration: 4 * time.Second,
		Origin: Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 100 * ms},
			Changes: []Change{{At: 2 * time.Second, Workers: 2}, {At: 3500 * ms, Workers: 4}}},
		Load:     Load{Rate: 1},
		Policies: []Policy{NonePolicy{}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, p := range res.Policies[0].Series {
		got = append(got, p.Capacity)
	}
	want := []float64{10, 10, 20, 30} // the last: half at 20, half at 40
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("capacity per interval %v, want %v", got, want)
		}
	}
	if c := res.Policies[0].Summary.Capacity; c != 17.5 {
		t.Errorf("summary capacity %v, want 17.5", c)
	}
}

// TestAchievableCarriesWhileClientsWait: demand 5 rps against a capacity
// of 7, then 3.5, then 7 again. Without a client timeout, the 6 requests
// the slow phase could not serve (1.5 rps for 4 s) are served in the lull
// after it, 4 of them by the end: (3 × 5 + 4 × 3.5 + 4) / 7 s, not the 29
// taking min(demand, capacity) interval by interval gives. The origin's
// queue serves them too, and the goodput of no policy at all was above
// that old figure.
func TestAchievableCarriesWhileClientsWait(t *testing.T) {
	s := Scenario{
		Duration: 8 * time.Second,
		Warmup:   time.Second,
		Origin: Origin{Workers: 7, Queue: 100, Service: Dist{Kind: Constant, Mean: time.Second},
			Changes: []Change{{At: 2 * time.Second, Service: Dist{Kind: Constant, Mean: 2 * time.Second}},
				{At: 6 * time.Second, Service: Dist{Kind: Constant, Mean: time.Second}}}},
		Load:     Load{Rate: 5},
		Policies: []Policy{NonePolicy{}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	sm := res.Policies[0].Summary
	if got, want := sm.Achievable, (3*5+4*3.5+4)/7.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("achievable %v, want %v", got, want)
	}
	if sm.Goodput > sm.Achievable {
		t.Errorf("goodput %v above the achievable %v", sm.Goodput, sm.Achievable)
	}
}

// TestAchievableLostAtTheDeadline: 10 requests at once against a capacity
// of 1 rps. Without a timeout all 10 are achievable in the 10 s; with a
// 3.5 s timeout, 3.5 (the fluid serves half of the fourth before its
// client leaves): 0.35 rps. Per interval, min(demand, capacity) gave 1
// request in the first second and nothing after: 0.1 rps, below the 3
// requests a queue serves in time.
func TestAchievableLostAtTheDeadline(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    float64
	}{{0, 1}, {3500 * ms, 0.35}} {
		s := Scenario{
			Duration: 10 * time.Second,
			Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: time.Second}},
			Load:     Load{Bursts: Bursts{Size: 10, Count: 1}, Timeout: c.timeout},
			Policies: []Policy{NonePolicy{}},
		}
		res, err := Run(s)
		if err != nil {
			t.Fatal(err)
		}
		sm := res.Policies[0].Summary
		if math.Abs(sm.Achievable-c.want) > 1e-9 {
			t.Errorf("timeout %v: achievable %v, want %v", c.timeout, sm.Achievable, c.want)
		}
		if sm.Goodput > sm.Achievable {
			t.Errorf("timeout %v: goodput %v above the achievable %v", c.timeout, sm.Goodput, sm.Achievable)
		}
	}
}

// TestAchievableWarmupMidInterval: an interval the warm-up cuts counts the
// demand of its part after the warm-up, not the whole interval's rate over
// that part. Load starts at the warm-up, 1.5 s, half-way through an
// interval, far below capacity: all of it is achievable.
func TestAchievableWarmupMidInterval(t *testing.T) {
	s := Scenario{
		Duration: 3 * time.Second, Warmup: 1500 * ms,
		Origin:   Origin{Workers: 10, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: 10 * ms}},
		Load:     Load{Steps: []Step{{At: 1500 * ms, Rate: 10}}},
		Policies: []Policy{NonePolicy{}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	// 14 requests in the window of 1.5 s (the first one gap after the step).
	sm := res.Policies[0].Summary
	if sm.Demand != 14/1.5 || sm.Achievable != sm.Demand || sm.Goodput != sm.Demand {
		t.Errorf("demand %v, achievable %v, goodput %v; want %v of each", sm.Demand, sm.Achievable, sm.Goodput, 14/1.5)
	}
}
