package sim

import (
	"testing"
	"time"
)

// TestTickerAtOfferedRate: a ticker at exactly the rate of constant
// arrivals has a token for each of them, whatever the rate: request k is
// sent at the instant of tick k, and a tick due by now is counted. Whether
// it was counted used to depend on rounding (at 3 rps one request in three
// was rejected, at 10 rps none).
func TestTickerAtOfferedRate(t *testing.T) {
	for _, r := range []float64{3, 7, 10, 425} {
		p := run1(t, Scenario{
			Duration: 10 * time.Second,
			Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
			Load:     Load{Rate: r},
			Policies: []Policy{TickerPolicy{Rate: r, Burst: 1}},
		})
		if s := p.Summary; s.Sent != int64(10*r) || len(s.Rejects) != 0 {
			t.Errorf("ticker at %v/s, offered %v/s: %d sent, rejects %v; want %v sent, none rejected", r, r, s.Sent, s.Rejects, 10*r)
		}
	}
}

// TestTickerQueueBoundCountsLiveWaiters: a waiter whose client gave up no
// longer takes a place in the ticker's queue. A retry keeps its request's
// deadline, so it can give up before a waiter queued ahead of it, and stay
// behind it in the queue until that one leaves.
func TestTickerQueueBoundCountsLiveWaiters(t *testing.T) {
	// No tick before 10 s, one token at the start; 10 rps, 350 ms deadline.
	// 0: A takes the token; the origin times it out at 250 ms and it is
	// retried (A'). 100, 200: B and C wait; 250: A' waits behind them;
	// 300: D finds the queue of 3 full (and so does its retry). 350: A's
	// deadline, A' gives up. 400: E finds B and C waiting, and a place.
	// 450: B gives up; C and E wait at the end.
	p := run1(t, Scenario{
		Duration: 500 * ms, Interval: 100 * ms,
		Origin:   Origin{Workers: 1, Queue: 1, Timeout: 250 * ms, Service: Dist{Kind: Constant, Mean: 10 * time.Second}},
		Load:     Load{Rate: 10, Timeout: 350 * ms, Retries: Retries{Max: 1}},
		Policies: []Policy{TickerPolicy{Rate: 0.1, Burst: 1, Queue: 3}},
	})
	if s := p.Summary; s.Rejects["queue_full"] != 2 || s.Retries != 2 {
		t.Errorf("%d rejected for a full queue, %d retries; want 2 (D and its retry) and 2 (A's, D's)", s.Rejects["queue_full"], s.Retries)
	}
	if q := p.Series[4].Queued; q != 2 {
		t.Errorf("%d waiting at 500 ms, want 2 (C and E)", q)
	}
}
