package concurrency

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Stats never shows a limiter whose permit is held as idle (InFlight 0,
// Queued 0), however the fast path and the lock hand over: keyed.Map
// evicts a key whose limiter says idle, and the key's next caller would
// get a second limiter while the first permit is still held. The hand-over
// is a few instructions wide: the test reads Stats many times while other
// callers queue and time out, and it caught the old order under -race.
func TestStatsNeverIdleWhileHeld(t *testing.T) {
	l := mustNew(t, Config{Limit: 1, MaxQueue: 4, MaxWait: 50 * time.Microsecond})
	p := mustAcquire(t, l)
	defer p.Release(sluice.Success, 0)
	const reads = 300_000
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				if q, err := l.Acquire(context.Background()); err == nil {
					q.Release(sluice.Success, 0)
					t.Error("a second permit was granted while the first is held")
					return
				}
			}
		})
	}
	idle := 0
	for range reads {
		if s := l.Stats(); s.InFlight == 0 && s.Queued == 0 {
			idle++
		}
	}
	stop.Store(true)
	wg.Wait()
	if idle > 0 {
		t.Fatalf("%d of %d Stats reads said idle while a permit was held all along", idle, reads)
	}
}
