package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// Per-key limits over 100,000 live keys. The published cross-library harness
// (sethvargo/go-limiter's, forked by clipperhouse/rate) builds its keys into a
// slice it never assigns, so every "multi-key" figure there is one key; here
// the keys are built up front, checked distinct (TestKeyedHarnessKeys), every
// limiter is filled with all of them before timing, and each call moves to
// the next key.
const numKeys = 100_000

func keyedKeys() []string {
	ks := make([]string, numKeys)
	for i := range ks {
		ks[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	return ks
}

func TestKeyedHarnessKeys(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range keyedKeys() {
		seen[k] = true
	}
	if len(seen) != numKeys {
		t.Fatalf("%d distinct keys, want %d", len(seen), numKeys)
	}
}

// Every limiter is set to admit every call a benchmark makes (a million
// tokens a key) with no key refilling or expiring within the run, so the
// figures are the per-key overhead, not rejections or churn.
const keyedTokens = 1 << 20

type keyedLib struct {
	name string
	// make returns a filled limiter's allow function, a check run after
	// the benchmark, and a closer.
	make func(b *testing.B, ks []string) (allow func(string) bool, check func(), close func())
}

var keyedLibs = []keyedLib{
	{"sluice-buckets", func(b *testing.B, ks []string) (func(string) bool, func(), func()) {
		kb, err := keyed.NewBuckets(keyed.BucketsConfig{
			Bucket:  rate.Config{Rate: 1, Burst: keyedTokens},
			MaxKeys: numKeys, IdleTimeout: time.Hour,
		})
		if err != nil {
			b.Fatal(err)
		}
		fill(b, ks, kb.Allow)
		check := func() {
			if st := kb.Stats(); st.Keys != numKeys || st.Overflowed != 0 || st.Evicted != 0 {
				b.Fatalf("sluice-buckets: %+v, want %d live keys throughout", st, numKeys)
			}
		}
		return kb.Allow, check, func() {}
	}},
	{"sluice-map", func(b *testing.B, ks []string) (func(string) bool, func(), func()) {
		m, err := keyed.New(keyed.Config[*rate.Bucket]{
			New: func(string) (*rate.Bucket, error) {
				return rate.NewBucket(rate.Config{Rate: 1, Burst: keyedTokens})
			},
			MaxKeys: numKeys, IdleTimeout: time.Hour,
		})
		if err != nil {
			b.Fatal(err)
		}
		allow := func(k string) bool {
			l, err := m.Get(k)
			return err == nil && l.Allow()
		}
		fill(b, ks, allow)
		check := func() {
			if st := m.Stats(); st.Keys != numKeys || st.Overflowed != 0 || st.Evicted != 0 {
				b.Fatalf("sluice-map: %+v, want %d live keys throughout", st, numKeys)
			}
		}
		return allow, check, func() {}
	}},
	{"sethvargo", func(b *testing.B, ks []string) (func(string) bool, func(), func()) {
		s, err := memorystore.New(&memorystore.Config{
			Tokens: keyedTokens, Interval: time.Hour,
			SweepInterval: time.Hour, SweepMinTTL: time.Hour,
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		allow := func(k string) bool {
			_, _, _, ok, err := s.Take(ctx, k)
			return err == nil && ok
		}
		fill(b, ks, allow)
		return allow, func() {}, func() { _ = s.Close(ctx) }
	}},
}

func fill(b *testing.B, ks []string, allow func(string) bool) {
	for _, k := range ks {
		if !allow(k) {
			b.Fatalf("key %s rejected while filling", k)
		}
	}
}

// BenchmarkKeyedAllow is one admission on one of 100,000 live keys, a
// different key on every call.
func BenchmarkKeyedAllow(b *testing.B) {
	ks := keyedKeys()
	for _, lib := range keyedLibs {
		b.Run("lib="+lib.name+"/keys=100000/mode=serial", func(b *testing.B) {
			allow, check, done := lib.make(b, ks)
			defer done()
			b.ReportAllocs()
			i := 0
			var cpu int64
			for b.Loop() {
				if i == 0 && cpu == 0 {
					cpu = cpuNanos() // after the fill, which b.Loop leaves out
				}
				if !allow(ks[i]) {
					b.Fatal("rejected")
				}
				if i++; i == len(ks) {
					i = 0
				}
			}
			reportCPU(b, cpu)
			check()
		})
		b.Run("lib="+lib.name+"/keys=100000/mode=parallel", func(b *testing.B) {
			allow, check, done := lib.make(b, ks)
			defer done()
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer() // the fill is not part of the figure (b.Loop does this for serial)
			cpu := cpuNanos()
			b.RunParallel(func(pb *testing.PB) {
				// Goroutines start far apart and walk the keys.
				i := int(start.Add(numKeys/8+1)) % len(ks)
				for pb.Next() {
					if !allow(ks[i]) {
						b.Error("rejected")
						return
					}
					if i++; i == len(ks) {
						i = 0
					}
				}
			})
			reportCPU(b, cpu)
			check()
		})
	}
}

// BenchmarkKeyedBytesPerKey reports the heap a live key costs: HeapAlloc
// after a GC before and after filling a new limiter with 100,000 keys (the
// keys themselves are built beforehand and not counted; a copy a limiter
// keeps is). ns/op is the cost of the whole fill.
func BenchmarkKeyedBytesPerKey(b *testing.B) {
	ks := keyedKeys()
	for _, lib := range keyedLibs {
		b.Run("lib="+lib.name+"/keys=100000", func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heapAfterGC()
				allow, check, done := lib.make(b, ks)
				after := heapAfterGC()
				check()
				runtime.KeepAlive(allow)
				done()
				perKey = float64(after-before) / numKeys
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
