package sim

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// countBelow counts values recorded in h (in microseconds) that are at
// most d, to the histogram's precision (3 significant digits: a value in
// the bucket that holds d counts).
func countBelow(h *hdrhistogram.Histogram, d time.Duration) int64 {
	if h == nil {
		return 0
	}
	limit := d.Microseconds()
	var n int64
	for _, b := range h.Distribution() {
		if b.From <= limit {
			n += b.Count
		}
	}
	return n
}
