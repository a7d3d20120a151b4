package promsluice

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
)

// BenchmarkAcquire is the wrapper's cost on the admission path: two clock
// reads and a histogram observation.
func BenchmarkAcquire(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		b.Run("wrapped="+map[bool]string{false: "false", true: "true"}[wrapped], func(b *testing.B) {
			lim, err := concurrency.New(concurrency.Config{Limit: concurrency.MaxLimit})
			if err != nil {
				b.Fatal(err)
			}
			var l sluice.Limiter = lim
			if wrapped {
				if l, _, err = Instrument("bench", lim); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
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
	}
}

// BenchmarkGather is one scrape of one instrumented limiter, as the
// registry does it (without the HTTP encoding).
func BenchmarkGather(b *testing.B) {
	lim, err := concurrency.New(concurrency.Config{Limit: 10})
	if err != nil {
		b.Fatal(err)
	}
	_, c, err := Instrument("bench", lim)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
