package redisstore

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histBuckets is the number of round-trip histogram buckets: bucket i counts
// round trips of at most 2^i µs (the last one everything longer), 1 µs to
// about 1 s.
const histBuckets = 21

// hist is a lock-free histogram of durations in power-of-two microsecond
// buckets: cheap enough to record every round trip, and what a Prometheus
// histogram needs (cumulative counts with upper bounds).
type hist struct {
	counts [histBuckets]atomic.Uint64
	sumNs  atomic.Int64
}

func (h *hist) record(d time.Duration) {
	// Rounded up: bucket i holds what is at most 2^i µs, as Prometheus's
	// le says; truncated, 1.999 µs was counted at most 1 µs.
	us := uint64((max(d, 0) + time.Microsecond - 1) / time.Microsecond)
	i := 0
	if us > 1 {
		i = bits.Len64(us - 1) // smallest i with us <= 2^i
	}
	if i >= histBuckets {
		i = histBuckets - 1
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// HistBucket is one histogram bucket: Count observations of at most UpperBound
// (not cumulative). The last bucket's UpperBound is 0: no bound.
type HistBucket struct {
	UpperBound time.Duration
	Count      uint64
}

func (h *hist) snapshot() ([]HistBucket, time.Duration) {
	out := make([]HistBucket, histBuckets)
	for i := range out {
		out[i] = HistBucket{UpperBound: time.Duration(1<<i) * time.Microsecond, Count: h.counts[i].Load()}
	}
	out[histBuckets-1].UpperBound = 0
	return out, time.Duration(h.sumNs.Load())
}

// Quantile returns an upper bound of the q-quantile (0 < q <= 1) of the
// round trips in buckets: the upper bound of the bucket where it falls, or
// the largest Duration when that is the last bucket, which has none. 0
// when buckets hold no round trip.
func Quantile(buckets []HistBucket, q float64) time.Duration {
	var total uint64
	for _, b := range buckets {
		total += b.Count
	}
	if total == 0 {
		return 0
	}
	// The rank of the q-quantile, rounded up: the p99 of 10 round trips is
	// the 10th, not the 9th.
	want := max(uint64(math.Ceil(q*float64(total))), 1)
	var n uint64
	for _, b := range buckets {
		n += b.Count
		if n >= want {
			if b.UpperBound == 0 {
				return math.MaxInt64
			}
			return b.UpperBound
		}
	}
	return math.MaxInt64
}
