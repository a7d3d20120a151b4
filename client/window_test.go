package client

import (
	"math"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	const s = int64(time.Second)
	type op struct {
		at     int64
		da, db int64
	}
	tests := []struct {
		name   string
		ops    []op
		at     int64
		wa, wb int64
	}{
		{"empty", nil, 0, 0, 0},
		{"same bucket", []op{{0, 1, 0}, {s / 2, 1, 1}}, s / 2, 2, 1},
		{"spread within window", []op{{0, 1, 0}, {3 * s, 1, 0}, {9 * s, 1, 1}}, 9 * s, 3, 1},
		{"oldest bucket leaves", []op{{0, 1, 0}, {3 * s, 1, 0}}, 10 * s, 1, 0},
		{"all leave after a long gap", []op{{0, 5, 5}, {3 * s, 1, 1}}, 100 * s, 0, 0},
		{"late add within window lands", []op{{9 * s, 1, 0}, {5 * s, 1, 0}}, 9 * s, 2, 0},
		{"late add outside window is dropped", []op{{20 * s, 1, 0}, {5 * s, 1, 0}}, 20 * s, 1, 0},
		{"decrement is floored at zero", []op{{0, 1, 0}, {0, -3, -1}}, 0, 0, 0},
		{"decrement in another bucket cannot steal", []op{{0, 2, 0}, {s, -1, 0}}, s, 2, 0},
		{"negative times", []op{{-3 * s, 1, 0}, {-s / 2, 1, 0}, {s / 2, 1, 0}}, s / 2, 3, 0},
		{"negative times expire", []op{{-10 * s, 1, 0}, {-s / 2, 1, 0}}, s / 2, 1, 0},
		{"totals at an earlier time do not rewind", []op{{5 * s, 1, 0}}, 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(10*s, 10)
			for _, o := range tt.ops {
				w.add(o.at, o.da, o.db)
			}
			a, b := w.totals(tt.at)
			if a != tt.wa || b != tt.wb {
				t.Fatalf("totals = (%d, %d), want (%d, %d)", a, b, tt.wa, tt.wb)
			}
			var sa, sb int64
			for _, bk := range w.ring {
				sa += bk.a
				sb += bk.b
			}
			if sa != w.sum.a || sb != w.sum.b {
				t.Fatalf("running sum (%d, %d) drifted from buckets (%d, %d)", w.sum.a, w.sum.b, sa, sb)
			}
		})
	}
}

// One-nanosecond buckets span the whole int64 range: a jump from the
// earliest time to the latest must clear the window, not loop over 2^63
// buckets (a signed difference overflowed).
func TestWindowJumpAcrossInt64(t *testing.T) {
	w := newWindow(10, 10)
	w.add(math.MinInt64, 1, 1)
	w.add(math.MaxInt64, 1, 0)
	if a, b := w.totals(math.MaxInt64); a != 1 || b != 0 {
		t.Fatalf("totals = (%d, %d), want (1, 0)", a, b)
	}
}
