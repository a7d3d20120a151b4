package sim

import (
	"testing"
	"time"
)

// TestBucketStartsFull: a token bucket admits its whole burst at virtual
// time 0, though virtual 0 is the clock's epoch, long before the bucket
// was made (engine.t).
func TestBucketStartsFull(t *testing.T) {
	s := Scenario{
		Duration: time.Second,
		Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Bursts: Bursts{Size: 20, Count: 1}},
		Policies: []Policy{TokenBucketPolicy{Rate: 0.001, Burst: 10}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	if sm := res.Policies[0].Summary; sm.Successes != 10 || sm.Rejects["rate"] != 10 {
		t.Errorf("%d admitted, %v rejected; want the burst of 10 and 10 rejected", sm.Successes, sm.Rejects)
	}
}

// TestBucketDeadlineRule: the token bucket's wait follows the library's
// rule (internal/waitrule): a turn must come strictly before the client's
// deadline. Requests at 0 and 0.5 s with a 0.5 s deadline, a bucket of 1
// token refilled at 1 per second: the second's token comes at 1 s, when
// its client gives up, so it is rejected at once for its deadline rather
// than left to time out.
func TestBucketDeadlineRule(t *testing.T) {
	s := Scenario{
		Duration: time.Second,
		Origin:   Origin{Workers: 10, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 2, Timeout: 500 * ms},
		Policies: []Policy{TokenBucketPolicy{Rate: 1, Burst: 1, MaxWait: 5 * time.Second}},
	}
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	sm := res.Policies[0].Summary
	if sm.Successes != 1 || sm.Rejects["deadline"] != 1 || sm.Timeouts != 0 {
		t.Errorf("successes %d, rejects %v, timeouts %d; want 1, deadline 1, 0", sm.Successes, sm.Rejects, sm.Timeouts)
	}
	if sm.RejectLatency.Max != 0 {
		t.Errorf("the rejection took %v, want at once", sm.RejectLatency.Max)
	}
}
