package sim

import (
	"slices"
	"testing"
	"time"
)

// TestRejectedSent: a rejection counts in Rejects when it happens, and in
// RejectedSent where its request was sent, however long it waited.
func TestRejectedSent(t *testing.T) {
	// The request sent at 0 s holds the only permit to the end; of those
	// sent each second after it, one waits in the queue of one until its
	// 2.5 s bound (queue_timeout), and the next two find the queue full.
	p := run1(t, Scenario{
		Duration: 8 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: time.Minute}},
		Load:     Load{Rate: 1, Timeout: time.Minute},
		Policies: []Policy{ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{Queue: 1, MaxWait: 2500 * time.Millisecond}}},
	})
	var rejects, sent []float64
	for _, pt := range p.Series {
		rejects, sent = append(rejects, pt.Rejects), append(sent, pt.RejectedSent)
	}
	// Intervals are [T - 1 s, T). Rejected at 2, 3, 3.5 (sent at 1), 5,
	// 6, 6.5 (sent at 4) and, after the end, 9.5 (sent at 7).
	if want := []float64{0, 0, 1, 2, 0, 1, 2, 0}; !slices.Equal(rejects, want) {
		t.Errorf("Rejects = %v, want %v", rejects, want)
	}
	if want := []float64{0, 1, 1, 1, 1, 1, 1, 1}; !slices.Equal(sent, want) {
		t.Errorf("RejectedSent = %v, want %v", sent, want)
	}
}
