package keyed_test

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// keys returns n distinct keys shaped like IPv4 addresses, built before any
// measurement so that their own bytes are not counted per key (the Map
// clones each key it keeps, and that clone is counted).
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	return ks
}

// heapPerKey fills a fresh limiter with every key and returns the heap it
// grew by per key, after a GC on each side.
func heapPerKey(b *testing.B, ks []string, fill func([]string) any) float64 {
	before := heapAfterGC()
	keep := fill(ks)
	after := heapAfterGC()
	runtime.KeepAlive(keep)
	return float64(after-before) / float64(len(ks))
}

// BenchmarkBytesPerKey measures the memory a live key costs: HeapAlloc after
// a GC, before and after inserting 100,000 keys. The ns/op figure is the
// cost of filling the map, per key.
func BenchmarkBytesPerKey(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	b.Run("limiter=map-rate.Bucket", func(b *testing.B) {
		var perKey float64
		for b.Loop() {
			perKey = heapPerKey(b, ks, func(ks []string) any {
				m, err := keyed.New(keyed.Config[*rate.Bucket]{
					New:     func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 10, Burst: 20}) },
					MaxKeys: n, IdleTimeout: time.Hour,
				})
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range ks {
					if !allow(m, k) {
						b.Fatal("a fresh key was rate limited")
					}
				}
				if m.Stats().Keys != n {
					b.Fatalf("%d keys live, want %d", m.Stats().Keys, n)
				}
				return m
			})
		}
		b.ReportMetric(perKey, "B/key")
	})
	b.Run("limiter=buckets", func(b *testing.B) {
		var perKey float64
		for b.Loop() {
			perKey = heapPerKey(b, ks, func(ks []string) any {
				kb, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 20}, MaxKeys: n, IdleTimeout: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range ks {
					if !kb.Allow(k) {
						b.Fatal("a fresh key was rate limited")
					}
				}
				if kb.Stats().Keys != n {
					b.Fatalf("%d keys live, want %d", kb.Stats().Keys, n)
				}
				return kb
			})
		}
		b.ReportMetric(perKey, "B/key")
	})
}

// BenchmarkAllow is one admission on one of 100,000 live keys, the map
// filled before timing and the key changing on every call.
func BenchmarkAllow(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	// Admits every call the benchmark makes (a million tokens a key), and
	// no bucket refills within the hour: measures the overhead over live keys.
	cfg := rate.Config{Rate: 1, Burst: 1 << 20}
	kb, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: cfg, MaxKeys: n, IdleTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	m, err := keyed.New(keyed.Config[*rate.Bucket]{
		New:     func(string) (*rate.Bucket, error) { return rate.NewBucket(cfg) },
		MaxKeys: n, IdleTimeout: time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range ks {
		kb.Allow(k)
		allow(m, k)
	}
	for _, tc := range []struct {
		name  string
		allow func(string) bool
	}{
		{"buckets", kb.Allow},
		{"map-rate.Bucket", func(k string) bool { return allow(m, k) }},
	} {
		b.Run("limiter="+tc.name+"/mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !tc.allow(ks[i]) {
					b.Fatal("rejected")
				}
				if i++; i == n {
					i = 0
				}
			}
		})
		b.Run("limiter="+tc.name+"/mode=parallel", func(b *testing.B) {
			b.ReportAllocs()
			var seed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919)) % n
				for pb.Next() {
					if !tc.allow(ks[i]) {
						b.Error("rejected")
						return
					}
					if i++; i == n {
						i = 0
					}
				}
			})
		})
	}
	if st := kb.Stats(); st.Keys != n || st.Overflowed != 0 {
		b.Fatalf("buckets: %+v, want %d keys, no overflow", st, n)
	}
}

func allow(m *keyed.Map[*rate.Bucket], key string) bool {
	l, err := m.Get(key)
	return err == nil && l.Allow()
}
