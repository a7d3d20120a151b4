package redisstore

import (
	"math"
	"testing"
	"time"
)

// A bucket holds what is at most its upper bound, as Prometheus's le says,
// and Quantile gives the bound of the bucket where the quantile's rank
// (rounded up) falls.
func TestHistBoundsAndQuantile(t *testing.T) {
	var h hist
	h.record(1999 * time.Nanosecond)                      // over 1 µs: the 2 µs bucket (it was counted at 1 µs)
	h.record(1024*time.Microsecond + 900*time.Nanosecond) // over 1.024 ms: the 2.048 ms bucket
	h.record(time.Microsecond)                            // exactly on a bound: that bucket
	b, _ := h.snapshot()
	for _, want := range []struct {
		bound time.Duration
		count uint64
	}{{time.Microsecond, 1}, {2 * time.Microsecond, 1}, {1024 * time.Microsecond, 0}, {2048 * time.Microsecond, 1}} {
		for _, x := range b {
			if x.UpperBound == want.bound && x.Count != want.count {
				t.Errorf("bucket le=%v holds %d, want %d", x.UpperBound, x.Count, want.count)
			}
		}
	}

	var tail hist // nine fast round trips and one slow: p99 is the slow one
	for range 9 {
		tail.record(time.Microsecond)
	}
	tail.record(500 * time.Millisecond)
	b, _ = tail.snapshot()
	if got := Quantile(b, 0.99); got != 524288*time.Microsecond {
		t.Errorf("p99 of 9 × 1 µs and 500 ms = %v, want 524.288ms", got)
	}
	if got := Quantile(b, 0.5); got != time.Microsecond {
		t.Errorf("p50 = %v, want 1µs", got)
	}

	var slow hist // past the last bound: no bound known
	for range 10 {
		slow.record(2 * time.Second)
	}
	b, _ = slow.snapshot()
	if got := Quantile(b, 0.5); got != math.MaxInt64 {
		t.Errorf("p50 of round trips past the last bound = %v, want the largest Duration", got)
	}
	if got := Quantile(make([]HistBucket, histBuckets), 0.5); got != 0 {
		t.Errorf("Quantile of no round trips = %v, want 0", got)
	}
}
