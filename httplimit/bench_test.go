package httplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// discardWriter is a ResponseWriter that keeps nothing, so the benchmarks
// measure the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

var benchBody = []byte("ok")

func benchHandlers(b testing.TB) []struct {
	name string
	h    http.Handler
} {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(benchBody) })
	open := rate.Config{Rate: rate.Inf}
	global, err := concurrency.New(concurrency.Config{Limit: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	perIP, err := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(open) },
	})
	if err != nil {
		b.Fatal(err)
	}
	mw := func(cfg Config) http.Handler { return mustNew(b, next, cfg) }
	return []struct {
		name string
		h    http.Handler
	}{
		{"bare", next},
		{"global_concurrency", mw(Config{Limiter: global})},
		{"per_ip_bucket", mw(Config{PerKey: perIP})},
		{"per_ip_bucket+global+policy", mw(Config{PerKey: perIP, Limiter: global,
			Policy: &RatePolicy{Quota: 10, Window: 1e9}})},
		{"per_ip_bucket+global+remaining", mw(Config{PerKey: perIP, Limiter: global,
			Policy: &RatePolicy{Quota: 10, Window: 1e9, Remaining: BucketRemaining(perIP.Get)}})},
		{"per_ip_bucket+trusted_proxy", mw(Config{PerKey: perIP,
			ClientIP: IPConfig{TrustedProxies: []string{"10.0.0.0/8"}}})},
	}
}

// BenchmarkMiddleware measures the middleware's cost per request against
// the same handler without it, calling ServeHTTP directly (no network). The
// limiters always admit, so this is the admit path's overhead.
func BenchmarkMiddleware(b *testing.B) {
	for _, c := range benchHandlers(b) {
		b.Run("handler="+c.name+"/mode=serial", func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.1.2.3:4567"
			r.Header.Set("X-Forwarded-For", "198.51.100.7")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, r)
			}
		})
		b.Run("handler="+c.name+"/mode=parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "10.1.2.3:4567"
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					c.h.ServeHTTP(w, r)
				}
			})
		})
	}
}

// BenchmarkRemaining measures RatePolicy.Remaining, which every admitted
// response with the RateLimit field calls: BucketRemaining over a Map's
// rate.Bucket (and over the one bucket, without the lookup), and a
// keyed.Buckets' Remaining for a stored key and for one the Overflow
// bucket serves. Each run starts from buckets holding half their burst (10
// s from full at 10/s), so the reading stays off the full bucket's
// shortcut.
func BenchmarkRemaining(b *testing.B) {
	cfg := rate.Config{Rate: 10, Burst: 200}
	half := func(b *testing.B, ok bool) {
		if !ok {
			b.Fatal("a bucket refused its first tokens")
		}
	}
	perIP := func(b *testing.B) (*keyed.Map[*rate.Bucket], *rate.Bucket) {
		m := perIPBuckets(b, cfg)
		mb, err := m.Get("k")
		if err != nil {
			b.Fatal(err)
		}
		half(b, mb.AllowN(100))
		return m, mb
	}
	lean := func(b *testing.B) *keyed.Buckets {
		// One key, stored and drained: a second key goes to the overflow.
		kb, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: cfg, MaxKeys: 1, IdleTimeout: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for range 100 {
			half(b, kb.AllowAt(time.Now(), "k"))
		}
		half(b, kb.Overflow().AllowN(100))
		return kb
	}
	for _, c := range []struct {
		name string
		key  string
		make func(*testing.B) func(string) (int, time.Duration)
	}{
		{"source=BucketRemaining/get=Map", "k", func(b *testing.B) func(string) (int, time.Duration) {
			m, _ := perIP(b)
			return BucketRemaining(m.Get)
		}},
		{"source=BucketRemaining/get=one_bucket", "", func(b *testing.B) func(string) (int, time.Duration) {
			_, mb := perIP(b)
			return BucketRemaining(func(string) (*rate.Bucket, error) { return mb, nil })
		}},
		{"source=keyed.Buckets/key=stored", "k", func(b *testing.B) func(string) (int, time.Duration) {
			return lean(b).Remaining
		}},
		{"source=keyed.Buckets/key=overflow", "other", func(b *testing.B) func(string) (int, time.Duration) {
			return lean(b).Remaining
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			remaining := c.make(b)
			if n, reset := remaining(c.key); n < 100 || n >= 200 || reset <= 0 {
				b.Fatalf("Remaining = %d, %v; want a bucket half full", n, reset)
			}
			b.ReportAllocs()
			for b.Loop() {
				remaining(c.key)
			}
		})
	}
}

// BenchmarkLoopback puts the same handlers behind a real server on
// loopback: the middleware's share of a whole request's cost.
func BenchmarkLoopback(b *testing.B) {
	for _, c := range benchHandlers(b) {
		if c.name != "bare" && c.name != "per_ip_bucket+global+policy" {
			continue
		}
		b.Run("handler="+c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			client := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestAdmitAllocations pins the admit path's allocations: the status
// writer (it escapes to the handler) and, per key, the key string.
func TestAdmitAllocations(t *testing.T) {
	want := map[string]float64{
		"global_concurrency":          1,
		"per_ip_bucket":               2,
		"per_ip_bucket+global+policy": 2,
		"per_ip_bucket+trusted_proxy": 2,
		// + the RateLimit value and its []string
		"per_ip_bucket+global+remaining": 4,
	}
	for _, c := range benchHandlers(t) {
		if c.name == "bare" {
			continue
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.1.2.3:4567"
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		w := &discardWriter{h: http.Header{}}
		got := testing.AllocsPerRun(200, func() { c.h.ServeHTTP(w, r) })
		if got > want[c.name] {
			t.Errorf("%s: %v allocations per request, want at most %v", c.name, got, want[c.name])
		}
	}
}
