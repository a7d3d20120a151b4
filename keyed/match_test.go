package keyed_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// A key of Buckets decides exactly as its own rate.Bucket would: the compact
// representation changes the memory, not the semantics.
func TestBucketsMatchRateBucket(t *testing.T) {
	for _, cfg := range []rate.Config{{Rate: 10, Burst: 1}, {Rate: 250, Burst: 7}, {Rate: 1000, Burst: 100}} {
		t.Run(strconv.FormatFloat(cfg.Rate, 'g', -1, 64), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(cfg.Burst)))
			kb := mustBuckets(t, keyed.BucketsConfig{Bucket: cfg, MaxKeys: 4})
			ref := map[string]*rate.Bucket{}
			now := time.Unix(1_000_000, 0)
			for i := range 20_000 {
				key := strconv.Itoa(rng.IntN(3))
				if ref[key] == nil {
					ref[key], _ = rate.NewBucket(cfg)
				}
				now = now.Add(time.Duration(rng.IntN(int(3e9/cfg.Rate))) * time.Nanosecond)
				want := ref[key].AllowAt(now, 1)
				if got := kb.AllowAt(now, key); got != want {
					t.Fatalf("step %d, key %s: keyed %v, rate.Bucket %v", i, key, got, want)
				}
			}
		})
	}
}

// Every rate and burst a rate.Bucket accepts, a key accepts too, and decides
// the same: no rate, no limit, no burst, a refill slower than 36 years, and
// rates whose token interval is below a nanosecond (the shard's time base
// then moves, which the jumps of hours here exercise).
func TestBucketsMatchRateBucketWholeRange(t *testing.T) {
	for _, cfg := range []rate.Config{
		{Rate: 0, Burst: 3}, {Rate: rate.Inf, Burst: 0}, {Rate: math.Inf(1), Burst: 2}, {Rate: 0, Burst: 0},
		{Rate: 1e-10, Burst: 10}, {Rate: 1e9, Burst: 3}, {Rate: 2.5e9, Burst: 4}, {Rate: 1e12, Burst: 50},
		{Rate: 1e18, Burst: 1 << 40},
	} {
		t.Run(fmt.Sprintf("rate=%g/burst=%d", cfg.Rate, cfg.Burst), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(cfg.Burst)))
			kb := mustBuckets(t, keyed.BucketsConfig{Bucket: cfg, MaxKeys: 4})
			ref := map[string]*rate.Bucket{}
			now := time.Unix(1_000_000, 0)
			admitted := 0
			for i := range 20_000 {
				key := strconv.Itoa(rng.IntN(3))
				if ref[key] == nil {
					ref[key], _ = rate.NewBucket(cfg)
				}
				switch rng.IntN(100) {
				case 0:
					now = now.Add(time.Duration(rng.IntN(10)) * time.Hour)
				case 1, 2, 3, 4, 5:
					// the same instant: only the burst tells
				default:
					now = now.Add(time.Duration(rng.IntN(4)) * time.Nanosecond)
				}
				want := ref[key].AllowAt(now, 1)
				if got := kb.AllowAt(now, key); got != want {
					t.Fatalf("step %d, key %s: keyed %v, rate.Bucket %v", i, key, got, want)
				}
				if want {
					admitted++
				}
				if got, want := kb.TokensAt(now, key), ref[key].TokensAt(now); got != want {
					t.Fatalf("step %d, key %s: keyed has %v tokens, rate.Bucket %v", i, key, got, want)
				}
			}
			if admitted == 0 && cfg.Burst > 0 {
				t.Fatal("nothing admitted: the comparison says nothing")
			}
		})
	}
}

// At 1e12 tokens/s a shard's time base reaches only ~34 s, so each phase
// here, 100 s after the last, moves it while eight goroutines race on the
// hot key and on others: every phase still admits exactly the burst.
func TestBucketsConcurrentRebase(t *testing.T) {
	const burst, workers, calls = 1000, 8, 300
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1e12, Burst: burst}, MaxKeys: 64})
	t0 := time.Unix(1_700_000_000, 0)
	for phase := range 20 {
		now := t0.Add(time.Duration(phase) * 100 * time.Second)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range workers {
			wg.Go(func() {
				for i := range calls {
					if b.AllowAt(now, "hot") {
						admitted.Add(1)
					}
					b.AllowAt(now, strconv.Itoa(g*calls+i%8))
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != burst {
			t.Fatalf("phase %d: admitted %d on the hot key, want the burst, %d", phase, got, burst)
		}
	}
}
