package client

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func BenchmarkThrottler(b *testing.B) {
	b.Run("mode=serial", func(b *testing.B) {
		th, _ := NewThrottler(ThrottlerConfig{})
		b.ReportAllocs()
		for b.Loop() {
			p, _ := th.TryAcquire()
			p.Release(sluice.Success, 0)
		}
	})
	b.Run("mode=parallel", func(b *testing.B) {
		th, _ := NewThrottler(ThrottlerConfig{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, _ := th.TryAcquire()
				p.Release(sluice.Success, 0)
			}
		})
	})
}

func BenchmarkThrottlerReject(b *testing.B) {
	th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }})
	for range 10 {
		p, _ := th.TryAcquire()
		p.Release(sluice.Dropped, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		th.TryAcquire()
	}
}

func BenchmarkRetryBudget(b *testing.B) {
	bu, _ := NewRetryBudget(RetryBudgetConfig{})
	b.ReportAllocs()
	for b.Loop() {
		bu.Request()
		bu.TryRetry()
	}
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Now()
	for _, v := range []string{"120", "Wed, 21 Oct 2015 07:28:00 GMT"} {
		b.Run("value="+v[:3], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseRetryAfter(v, now)
			}
		})
	}
}

// BenchmarkExecutor measures the cost of running one trivial task through
// the Executor: the slot, the goroutine, the bookkeeping.
func BenchmarkExecutor(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run("n="+itoa(n), func(b *testing.B) {
			e, _ := NewExecutor(n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				e.Go(ctx, func(context.Context) error { return nil })
			}
			e.Wait()
		})
	}
}
