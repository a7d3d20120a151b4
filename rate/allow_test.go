package rate

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// Allow decides on a path of its own (the common case apart from
// takeNanos). In virtual time it must decide exactly as AllowAt(time.Now())
// does on a twin bucket, which goes through takeNanos, and count the same:
// through refills, reservations that leave a debt (the stale-reading case),
// moves of the time base (1e12/s moves it every ~2 s), rate 0, Inf, burst 0
// and rates too slow to refill.
func TestAllowMatchesAllowAt(t *testing.T) {
	cfgs := []Config{
		{Rate: 10, Burst: 3},
		{Rate: 1e12, Burst: 5},
		{Rate: 1e9, Burst: 1},
		{Rate: 0, Burst: 4},
		{Rate: Inf, Burst: 0},
		{Rate: 5, Burst: 0},
		{Rate: 1e-12, Burst: 2},
	}
	for _, cfg := range cfgs {
		synctest.Test(t, func(t *testing.T) {
			a, b := mustBucket(t, cfg), mustBucket(t, cfg)
			rng := rand.New(rand.NewPCG(1, uint64(cfg.Burst)))
			steps := []time.Duration{0, 0, time.Nanosecond, time.Millisecond, 50 * time.Millisecond, time.Second, 3 * time.Second}
			for i := range 5000 {
				time.Sleep(steps[rng.IntN(len(steps))])
				if rng.IntN(8) == 0 { // a reservation that may leave a debt
					n, wait := 1+rng.IntN(3), time.Duration(rng.IntN(500))*time.Millisecond
					ra, oka := a.ReserveAt(time.Now(), n, wait)
					rb, okb := b.ReserveAt(time.Now(), n, wait)
					if oka != okb || ra.Delay() != rb.Delay() {
						t.Fatalf("%+v step %d: reservations differ: %v %v / %v %v", cfg, i, oka, ra.Delay(), okb, rb.Delay())
					}
					continue
				}
				if ga, gb := a.Allow(), b.AllowAt(time.Now(), 1); ga != gb {
					t.Fatalf("%+v step %d: Allow %v, AllowAt %v", cfg, i, ga, gb)
				}
			}
			if sa, sb := a.Stats(), b.Stats(); sa != sb {
				t.Fatalf("%+v: stats %+v, want %+v", cfg, sa, sb)
			}
		})
	}
}
