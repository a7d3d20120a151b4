package rate

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
)

// A bucket that cannot run out must never say no, however the goroutines
// are scheduled. More goroutines than cores, so that the scheduler stops
// some in the middle of a call, between the clock reading and the word,
// for a time slice while the others go on taking tokens at later times.
//
// 1e12/s with 2^30 at once is bench's admit case (it splits into stripes).
// 1e9/s with 1000 at once stays one word (below the size that splits), so
// admissions are one CAS at a time, each over a nanosecond: the token they
// take is back before the next. Without the fix the second failed 16 runs
// in 20 (-cpu 2,4), the first 2 in 6.
func TestAllowNeverRefusesAFullBucket(t *testing.T) {
	for _, cfg := range []Config{{Rate: 1e12, Burst: 1 << 30}, {Rate: 1e9, Burst: 1000}} {
		t.Run(fmt.Sprint(cfg.Rate, "/", cfg.Burst), func(t *testing.T) { neverRefuses(t, cfg) })
	}
}

func neverRefuses(t *testing.T, cfg Config) {
	b := mustBucket(t, cfg)
	calls := 300_000
	if raceOn {
		calls /= 30
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for range calls {
				if !b.Allow() {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Errorf("%d calls refused by a bucket that cannot run out", n)
	}
	all, no := uint64(8*runtime.GOMAXPROCS(0)*calls), uint64(refused.Load())
	if st := b.Stats(); st.Admitted != all-no || st.Rejected[sluice.ReasonRate] != no {
		t.Errorf("Stats: %d admitted, %d rejected; want %d, %d", st.Admitted, st.Rejected[sluice.ReasonRate], all-no, no)
	}
}

// A bucket that does not refill within the test (a token in 1000 s): once
// a call has been refused, the bucket was empty, so no call that starts
// afterwards may be admitted; and exactly the burst is admitted in all.
// Without the fix, the burst that splits failed 17 runs in 20: a refusal
// while a search of the stripes ran, or while a lease was between the word
// and its stripe.
func TestNoAdmissionAfterARefusal(t *testing.T) {
	// 500 stays one word; the other splits into stripes on a collision.
	for _, burst := range []int{500, 8 * stripes() * leaseSize} {
		t.Run(fmt.Sprint("burst=", burst), func(t *testing.T) {
			for range 20 {
				b := mustBucket(t, Config{Rate: 1e-3, Burst: burst})
				var refusedOnce atomic.Bool
				var admitted, late atomic.Int64
				var wg sync.WaitGroup
				for range 8 * runtime.GOMAXPROCS(0) {
					wg.Go(func() {
						for {
							after := refusedOnce.Load()
							if !b.Allow() {
								refusedOnce.Store(true)
								return
							}
							admitted.Add(1)
							if after {
								late.Add(1)
							}
						}
					})
				}
				wg.Wait()
				if n := late.Load(); n > 0 {
					t.Fatalf("%d calls admitted after a refusal: the refusal was wrong", n)
				}
				if got := admitted.Load(); got != int64(burst) {
					t.Fatalf("%d admitted, want exactly %d", got, burst)
				}
				if st := b.Stats(); st.Admitted != uint64(burst) {
					t.Fatalf("Stats.Admitted = %d, want %d", st.Admitted, burst)
				}
			}
		})
	}
}
