package concurrency

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestCacheStressLimitLowered is TestCacheAfterLimitLowered without the
// hand: workers take and release permits (the releases cached while the
// limit is high) while the limit drops to 1 and comes back. A call that
// starts and ends while the limit is 1 must not hold its permit alongside
// another. Run with -race -count=N: the release must be preempted between
// its read of wide and its caching for all of SetLimit, which is rare. On
// the code before fromCache checked the word, 2 runs in 60 failed as set
// here, and 3 in 8 with 8 workers and 20000 rounds (5 to 20 s a run).
func TestCacheStressLimitLowered(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	l := mustNew(t, Config{Limit: 1000})
	var phase atomic.Int64 // odd while the limit is 1
	var held, over atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(until(stop, func() {
			e := phase.Load()
			p, err := l.TryAcquire()
			if err != nil {
				runtime.Gosched() // let the resizer run
				return
			}
			if n := held.Add(1); n > 1 && e%2 == 1 && phase.Load() == e {
				over.Add(1)
			}
			held.Add(-1)
			p.Release(sluice.Ignore, 0)
		}))
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

// Stats never says a limiter is idle while a permit is held, however the
// other callers' permits move between the word and the cache: keyed.Map
// evicts an idle limiter. Here one permit is held throughout while other
// callers take and release permits, and SetLimit, unchanged, drains the
// cache over and over, so that their next permit comes from the word and
// goes back to the cache.
func TestCacheStatsNeverIdleWhileHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	l := mustNew(t, Config{Limit: 1000})
	p := mustAcquire(t, l)
	defer p.Release(sluice.Success, 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(until(stop, func() {
			q := mustAcquire(t, l)
			q.Release(sluice.Ignore, 0)
		}))
	}
	wg.Go(until(stop, func() {
		_ = l.SetLimit(1000)
	}))
	const reads = 300_000
	idle, low := 0, 1
	for range reads {
		if s := l.Stats(); s.InFlight < 1 {
			idle++
			low = min(low, s.InFlight)
		}
	}
	close(stop)
	wg.Wait()
	if idle > 0 {
		t.Errorf("%d of %d Stats reads said fewer than the 1 permit held all along (lowest %d)", idle, reads, low)
	}
}

// until returns a function that calls f over and over until stop is
// closed: a stress worker's loop.
func until(stop <-chan struct{}, f func()) func() {
	return func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			f()
		}
	}
}
