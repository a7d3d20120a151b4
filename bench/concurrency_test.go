package bench

import (
	"context"
	"runtime"
	"sync"
	"testing"

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

// allocsPerQueuedWaiter measures allocations per caller that certainly
// waited in the queue: one permit held, n callers queue, then all drain.
func BenchmarkConcurrencyPerQueuedWaiter(b *testing.B) {
	ctx := context.Background()
	const n = 64
	b.Run("lib=sluice", func(b *testing.B) {
		l, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: n})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var wg sync.WaitGroup
		for b.Loop() {
			p, _ := l.Acquire(ctx)
			for range n {
				wg.Go(func() {
					q, err := l.Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					q.Release(sluice.Success, 0)
				})
			}
			for l.Stats().Queued < n {
				runtimeGosched()
			}
			p.Release(sluice.Success, 0)
			wg.Wait()
		}
		b.ReportMetric(float64(n), "waiters/op")
	})
	b.Run("lib=semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		b.ReportAllocs()
		var wg sync.WaitGroup
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			for range n {
				wg.Go(func() {
					if err := s.Acquire(ctx, 1); err != nil {
						b.Error(err)
						return
					}
					s.Release(1)
				})
			}
			// x/sync/semaphore exposes no queue length: wait until the
			// goroutines have had time to block.
			for range 4 * n {
				runtimeGosched()
			}
			s.Release(1)
			wg.Wait()
		}
		b.ReportMetric(float64(n), "waiters/op")
	})
}

func runtimeGosched() { runtime.Gosched() }
