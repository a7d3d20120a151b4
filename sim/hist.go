package sim

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// countBelow counts values recorded in h (in microseconds) that are at most d.
func countBelow(h *hdrhistogram.Histogram, d time.Duration) int64 {
	if h == nil {
		return 0
	}
	limit := d.Microseconds()
	var n int64
	for _, b := range h.Distribution() {
		if b.To <= limit {
			n += b.Count
		} else if b.From <= limit {
			n += b.Count
		}
	}
	return n
}
