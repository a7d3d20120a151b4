package concurrency

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestCacheStressLimitLowered is TestCacheAfterLimitLowered without the
// hand: workers take and release permits (the releases cached while the
// limit is high) while the limit drops to 1 and comes back. A call that
// starts and ends while the limit is 1 must not hold its permit alongside
// another. Run with -race -count=N: the release must stop between its read
// of wide and its caching for all of SetLimit, which is rare.
func TestCacheStressLimitLowered(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	l := mustNew(t, Config{Limit: 1000})
	var phase atomic.Int64 // odd while the limit is 1
	var held, over atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				e := phase.Load()
				p, err := l.TryAcquire()
				if err != nil {
					continue
				}
				if n := held.Add(1); n > 1 && e%2 == 1 && phase.Load() == e {
					over.Add(1)
				}
				held.Add(-1)
				p.Release(sluice.Ignore, 0)
			}
		})
	}
	for range 5000 {
		_ = l.SetLimit(1)
		phase.Add(1)
		for range 20 {
			if p, err := l.TryAcquire(); err == nil {
				p.Release(sluice.Ignore, 0)
			}
		}
		phase.Add(1)
		_ = l.SetLimit(1000)
	}
	close(stop)
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("%d admissions held alongside another while the limit was 1", n)
	}
}
