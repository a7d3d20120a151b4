package concurrency

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

// TestStress hammers every discipline from many goroutines with cancels,
// deadlines, resizes and both outcomes, and checks under -race that the
// limit is never exceeded (resizes only go below it), that every call ends in a
// permit, a rejection or ctx.Err(), and that the books balance at the end.
//
// The goroutines run in parallel on every core; the bubble only makes the
// clock virtual, so the sleeps that hold permits and space the resizes, the
// MaxWait timers and CoDel's clock cost no real time and cannot flake.
func TestStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	for d := FIFO; d < numDisciplines; d++ {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { stress(t, d) })
		})
	}
}

func stress(t *testing.T, d Discipline) {
	const limit = 3
	l := mustNew(t, Config{Limit: limit, MaxQueue: 8, MaxWait: 2 * time.Millisecond, Discipline: d,
		CoDelTarget: 200 * time.Microsecond, CoDelInterval: time.Millisecond})
	var inFlight, maxSeen atomic.Int64 // maxSeen: an in-flight count over the limit
	var ok, rejected, canceled atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*200*time.Microsecond+50*time.Microsecond)
				var p sluice.Permit
				var err error
				if (g+i)%5 == 0 {
					p, err = l.TryAcquire()
				} else {
					p, err = l.Acquire(ctx)
				}
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
					n := inFlight.Add(1)
					if n > limit {
						maxSeen.Store(n)
					}
					if i%50 == 0 {
						time.Sleep(100 * time.Microsecond)
					}
					inFlight.Add(-1)
					p.Release(sluice.Outcome(i%4), time.Duration(i)*time.Microsecond)
				case errors.Is(err, sluice.ErrRejected):
					rejected.Add(1)
				case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
					canceled.Add(1)
				default:
					t.Errorf("unexpected error %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			_ = l.SetLimit(1 + i%limit)
			time.Sleep(50 * time.Microsecond)
			_ = l.SetLimit(limit)
			time.Sleep(200 * time.Microsecond)
		}
	})
	wg.Wait()
	if n := maxSeen.Load(); n > 0 {
		t.Errorf("in flight reached %d, above the limit %d", n, limit)
	}
	s := l.Stats()
	if s.InFlight != 0 || s.Queued != 0 || s.Limit != limit {
		t.Errorf("after the storm: %+v, want nothing in flight or queued", s)
	}
	if s.Admitted != uint64(ok.Load()) {
		t.Errorf("Admitted = %d, callers got %d permits", s.Admitted, ok.Load())
	}
	if s.RejectedTotal() != uint64(rejected.Load()) {
		t.Errorf("RejectedTotal = %d, callers saw %d rejections", s.RejectedTotal(), rejected.Load())
	}
	t.Logf("%v: %d ok, %d rejected, %d gave up; %v", d, ok.Load(), rejected.Load(), canceled.Load(), s.Rejected)
}

// TestStressAdaptive runs the Algorithm path (every Success and Dropped
// through the Core, the fast path open between them) under -race with a
// real AIMD, and checks the books balance. Parallel goroutines, virtual
// clock, as in TestStress.
func TestStressAdaptive(t *testing.T) { synctest.Test(t, stressAdaptive) }

func stressAdaptive(t *testing.T) {
	aimd, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: 4, MaxLimit: 8, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l := mustNew(t, Config{Algorithm: aimd, MaxQueue: 4, Discipline: AdaptiveLIFO, CoDelTarget: 100 * time.Microsecond, CoDelInterval: time.Millisecond})
	var ok, rejected atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				p, err := l.Acquire(context.Background())
				if err != nil {
					if !errors.Is(err, sluice.ErrRejected) {
						t.Errorf("unexpected error %v", err)
					}
					rejected.Add(1)
					continue
				}
				ok.Add(1)
				if s := l.Stats(); s.InFlight > 8 {
					t.Errorf("in flight %d above AIMD's MaxLimit 8", s.InFlight)
				}
				time.Sleep(time.Duration(g*i%3) * 20 * time.Microsecond)
				p.Release(sluice.Outcome(i%3), time.Duration(i%50)*time.Microsecond)
			}
		})
	}
	wg.Wait()
	s := l.Stats()
	if s.InFlight != 0 || s.Queued != 0 || s.Admitted != uint64(ok.Load()) || s.RejectedTotal() != uint64(rejected.Load()) {
		t.Errorf("Stats = %+v; callers saw %d permits, %d rejections", s, ok.Load(), rejected.Load())
	}
	if s.Limit < 1 || s.Limit > 8 {
		t.Errorf("Limit = %v, want within AIMD's [1, 8]", s.Limit)
	}
}
