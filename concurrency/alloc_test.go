package concurrency

import (
	"context"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

func TestFastPathAllocatesNothing(t *testing.T) {
	l := mustNew(t, Config{Limit: 4, MaxQueue: 4})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(sluice.Success, 1)
	}); n != 0 {
		t.Errorf("Acquire+Release: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		p.Cancel()
	}); n != 0 {
		t.Errorf("TryAcquire+Cancel: %v allocs, want 0", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := l.Acquire(cctx)
		p.Release(sluice.Dropped, 1)
	}); n != 0 {
		t.Errorf("Acquire(cancelable ctx)+Release: %v allocs, want 0", n)
	}
}

func TestAdaptiveReleaseAllocatesNothing(t *testing.T) {
	l := mustNew(t, Config{Algorithm: &recorder{next: 2, samples: make([]adaptive.Sample, 0, 2000)}})
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := l.Acquire(context.Background())
		p.Release(sluice.Success, 1)
	}); n != 0 {
		t.Errorf("Acquire+Release with an Algorithm: %v allocs, want 0", n)
	}
}

// TestAdmissionCount checks the admission count kept in the fast path's
// word across many flushes, with Stats read concurrently (run with -race).
func TestAdmissionCount(t *testing.T) {
	l := mustNew(t, Config{Limit: 2, MaxQueue: 8})
	const per, workers = 3*flushAt + 17, 4
	done := make(chan struct{})
	var readerWG sync.WaitGroup
	readerWG.Go(func() {
		var last uint64
		for {
			select {
			case <-done:
				return
			default:
			}
			s := l.Stats()
			if s.Admitted < last {
				t.Errorf("Admitted went back from %d to %d", last, s.Admitted)
				return
			}
			last = s.Admitted
			if s.InFlight > 2 {
				t.Errorf("InFlight %d over the limit", s.InFlight)
				return
			}
		}
	})
	acquireReleaseFrom(t, l, workers, per)
	close(done)
	readerWG.Wait()
	if s := l.Stats(); s.Admitted != per*workers || s.InFlight != 0 || s.Limit != 2 {
		t.Errorf("Stats = %+v, want %d admitted", s, per*workers)
	}
}

// Under overload most calls are rejections: with no latency known yet (no
// retry-after hint to carry) they allocate nothing and take no lock.
func TestRejectionAllocatesNothing(t *testing.T) {
	l := mustNew(t, Config{Limit: 1})
	p := mustAcquire(t, l)
	defer p.Release(sluice.Success, 0)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := l.Acquire(context.Background()); err == nil {
			t.Fatal("admitted over the limit")
		}
		if _, err := l.TryAcquire(); err == nil {
			t.Fatal("admitted over the limit")
		}
	}); n != 0 {
		t.Errorf("rejections: %v allocs, want 0", n)
	}
	if s := l.Stats(); s.Rejected[sluice.ReasonLimit] != 2002 {
		t.Errorf("rejections counted %d, want 2002", s.Rejected[sluice.ReasonLimit])
	}
}

// acquireReleaseFrom has workers goroutines each acquire and release per
// permits, and returns when all are done.
func acquireReleaseFrom(t *testing.T, l *Limiter, workers, per int) {
	t.Helper()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range per {
				p, err := l.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				p.Release(sluice.Success, 1)
			}
		})
	}
	wg.Wait()
}
