package bench

import (
	"context"
	"testing"
	"time"

	xrate "golang.org/x/time/rate"

	"github.com/sluicehq/sluice/rate"
)

// The token bucket against golang.org/x/time/rate, side by side. Two cases:
// admit (rate and burst far above what the benchmark can take, so every
// call is admitted: the overhead of a decision) and deny (one token, then
// one per 1000 s: every call is rejected after the first). Reading the clock
// dominates both, so the clock itself is measured too.

type bucketLib struct {
	name string
	// make returns an Allow function for a bucket of rate r and burst b.
	make func(r float64, b int) func() bool
}

var bucketLibs = []bucketLib{
	{"sluice", func(r float64, b int) func() bool {
		bk, err := rate.NewBucket(rate.Config{Rate: r, Burst: b})
		if err != nil {
			panic(err)
		}
		return bk.Allow
	}},
	{"xrate", func(r float64, b int) func() bool {
		return xrate.NewLimiter(xrate.Limit(r), b).Allow
	}},
}

var bucketCases = []struct {
	name  string
	rate  float64
	burst int
	admit bool // every call is expected to be admitted (after the first, for deny: none)
}{
	{"admit", 1e12, 1 << 30, true},
	{"deny", 1e-3, 1, false},
}

func BenchmarkAllow(b *testing.B) {
	for _, c := range bucketCases {
		for _, lib := range bucketLibs {
			b.Run("case="+c.name+"/lib="+lib.name, func(b *testing.B) {
				allow := lib.make(c.rate, c.burst)
				allow()
				b.ReportAllocs()
				wrong := 0
				cpu := cpuNanos()
				for b.Loop() {
					if allow() != c.admit {
						wrong++
					}
				}
				reportCPU(b, cpu)
				if wrong > 0 {
					b.Fatalf("%d calls decided against the case", wrong)
				}
			})
		}
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	for _, c := range bucketCases {
		for _, lib := range bucketLibs {
			b.Run("case="+c.name+"/lib="+lib.name, func(b *testing.B) {
				allow := lib.make(c.rate, c.burst)
				allow()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if allow() != c.admit {
							b.Error("a call decided against the case")
							return
						}
					}
				})
			})
		}
	}
}

// Wait when the token is there: the path every admitted request of a
// waiting limiter takes.
func BenchmarkWaitNoDelay(b *testing.B) {
	ctx := context.Background()
	b.Run("lib=sluice", func(b *testing.B) {
		bk, _ := rate.NewBucket(rate.Config{Rate: 1e12, Burst: 1 << 30})
		b.ReportAllocs()
		for b.Loop() {
			if err := bk.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lib=xrate", func(b *testing.B) {
		l := xrate.NewLimiter(1e12, 1<<30)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Reserve then Cancel: the refund path sluice.All uses.
func BenchmarkReserveCancel(b *testing.B) {
	b.Run("lib=sluice", func(b *testing.B) {
		bk, _ := rate.NewBucket(rate.Config{Rate: 1e12, Burst: 1 << 30})
		b.ReportAllocs()
		for b.Loop() {
			r, _ := bk.Reserve(1, 0)
			r.Cancel()
		}
	})
	b.Run("lib=xrate", func(b *testing.B) {
		l := xrate.NewLimiter(1e12, 1<<30)
		b.ReportAllocs()
		for b.Loop() {
			l.Reserve().Cancel()
		}
	})
}

var sinkTime time.Time
var sinkDur time.Duration

// What a clock read costs here: time.Now reads wall and monotonic clocks;
// time.Since reads only the monotonic one, which is what the bucket uses.
func BenchmarkClock(b *testing.B) {
	epoch := time.Now()
	b.Run("call=time.Now", func(b *testing.B) {
		for b.Loop() {
			sinkTime = time.Now()
		}
	})
	b.Run("call=time.Since", func(b *testing.B) {
		for b.Loop() {
			sinkDur = time.Since(epoch)
		}
	})
	b.Run("call=time.Since/parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var d time.Duration
			for pb.Next() {
				d += time.Since(epoch)
			}
			if d < 0 {
				b.Error("the monotonic clock went back")
			}
		})
	})
}
