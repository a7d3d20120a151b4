package bench

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"golang.org/x/sync/semaphore"
)

// The uncontended path: a permit is always free. Serial and with
// RunParallel (every goroutine on the same limiter).
func BenchmarkConcurrencyUncontended(b *testing.B) {
	ctx := context.Background()
	const limit = 1 << 20
	b.Run("lib=sluice/mode=serial", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: limit, MaxQueue: 100})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := l.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(sluice.Success, 0)
		}
	})
	b.Run("lib=semaphore/mode=serial", func(b *testing.B) {
		s := semaphore.NewWeighted(limit)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			s.Release(1)
		}
	})
	b.Run("lib=sluice/mode=parallel", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: limit, MaxQueue: 100})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := l.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Release(sluice.Success, 0)
			}
		})
	})
	b.Run("lib=semaphore/mode=parallel", func(b *testing.B) {
		s := semaphore.NewWeighted(limit)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Error(err)
					return
				}
				s.Release(1)
			}
		})
	})
	b.Run("lib=sluice-try/mode=serial", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: limit})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := l.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Release(sluice.Success, 0)
		}
	})
	b.Run("lib=semaphore-try/mode=serial", func(b *testing.B) {
		s := semaphore.NewWeighted(limit)
		b.ReportAllocs()
		for b.Loop() {
			if !s.TryAcquire(1) {
				b.Fatal("TryAcquire failed")
			}
			s.Release(1)
		}
	})
}

// Forced queueing: limit 1 and 4 goroutines per GOMAXPROCS, so nearly
// every Acquire waits in the queue. allocs/op is allocations per acquire,
// most of which queued.
func BenchmarkConcurrencyQueued(b *testing.B) {
	ctx := context.Background()
	for _, d := range []concurrency.Discipline{concurrency.FIFO, concurrency.LIFO, concurrency.AdaptiveLIFO} {
		b.Run("lib=sluice/discipline="+d.String(), func(b *testing.B) {
			l, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1 << 20, Discipline: d, CoDelTarget: 1 << 40, CoDelInterval: 1 << 41})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, err := l.Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					p.Release(sluice.Success, 0)
				}
			})
			s := l.Stats()
			b.ReportMetric(float64(s.Admitted), "admitted")
		})
	}
	b.Run("lib=semaphore/discipline=fifo", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Error(err)
					return
				}
				s.Release(1)
			}
		})
	})
}

// BenchmarkConcurrencyPerQueuedWaiter measures the cost of callers that
// certainly wait: one permit is held, n persistent worker goroutines queue
// for it, then the permit is released and the queue drains. The workers are
// started once, so allocs/op divided by waiters/op is the allocations per
// queued waiter, with no harness allocations mixed in.
func BenchmarkConcurrencyPerQueuedWaiter(b *testing.B) {
	const n = 64
	type sem struct {
		acquire func(context.Context) (sluice.Permit, error)
		queued  func() bool // reports that all n have queued, if it can tell
	}
	run := func(b *testing.B, s sem) {
		start, done := make(chan struct{}), make(chan struct{})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				ctx := context.Background()
				for {
					select {
					case <-start:
					case <-stop:
						return
					}
					p, err := s.acquire(ctx)
					if err != nil {
						b.Error(err)
					}
					p.Release(sluice.Success, 0)
					done <- struct{}{}
				}
			})
		}
		b.ReportAllocs()
		for b.Loop() {
			p, _ := s.acquire(context.Background())
			for range n {
				start <- struct{}{}
			}
			for i := 0; !s.queued(); i++ {
				runtime.Gosched()
			}
			p.Release(sluice.Success, 0)
			for range n {
				<-done
			}
		}
		b.StopTimer()
		close(stop)
		wg.Wait()
		b.ReportMetric(n, "waiters/op")
	}
	for _, mw := range []time.Duration{0, time.Hour} {
		b.Run("lib=sluice/maxwait="+mw.String(), func(b *testing.B) {
			l, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: n, MaxWait: mw})
			if err != nil {
				b.Fatal(err)
			}
			run(b, sem{
				acquire: l.Acquire,
				queued:  func() bool { return l.Stats().Queued == n },
			})
		})
	}
	b.Run("lib=semaphore/maxwait=0s", func(b *testing.B) {
		s := (*weighted)(semaphore.NewWeighted(1))
		polls := 0
		run(b, sem{
			acquire: s.Acquire,
			// x/sync/semaphore exposes no queue length: yield long enough
			// for the workers to block.
			queued: func() bool { polls++; return polls%(4*n) == 0 },
		})
	})
}

// weighted gives semaphore.Weighted sluice's permit shape, without
// allocating, for the harness above.
type weighted semaphore.Weighted

func (w *weighted) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := (*semaphore.Weighted)(w).Acquire(ctx, 1); err != nil {
		return sluice.Permit{}, err
	}
	return sluice.NewPermit(w, 0), nil
}

func (w *weighted) Release(uint64, sluice.Outcome, time.Duration) {
	(*semaphore.Weighted)(w).Release(1)
}

func (w *weighted) Cancel(uint64) { (*semaphore.Weighted)(w).Release(1) }

// BenchmarkConcurrencyRejected is the overload path: every permit is held
// and there is no queue, so every call is rejected. semaphore.Weighted has
// no rejecting Acquire; its TryAcquire is the equivalent.
func BenchmarkConcurrencyRejected(b *testing.B) {
	ctx := context.Background()
	b.Run("lib=sluice/mode=parallel", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		p, _ := l.Acquire(ctx)
		defer p.Release(sluice.Success, 0)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Acquire(ctx); err == nil {
					b.Error("admitted over the limit")
					return
				}
			}
		})
	})
	b.Run("lib=sluice-queue-full/mode=parallel", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1, Discipline: concurrency.CoDel, CoDelInterval: time.Hour, CoDelTarget: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		p, _ := l.Acquire(ctx)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _, _ = l.Acquire(wctx); close(done) }()
		for l.Stats().Queued < 1 {
			runtime.Gosched()
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Acquire(ctx); err == nil {
					b.Error("admitted over the limit")
					return
				}
			}
		})
		b.StopTimer()
		cancel()
		<-done
		p.Release(sluice.Success, 0)
	})
	b.Run("lib=semaphore/mode=parallel", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		_ = s.Acquire(ctx, 1)
		defer s.Release(1)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if s.TryAcquire(1) {
					b.Error("admitted over the limit")
					return
				}
			}
		})
	})
}
