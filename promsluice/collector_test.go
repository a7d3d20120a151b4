package promsluice

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/netlimit"
	"github.com/sluicehq/sluice/rate"
)

func newConcurrency(t *testing.T, cfg concurrency.Config) *concurrency.Limiter {
	t.Helper()
	l, err := concurrency.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLimiterScrape admits and rejects a known number of times and reads
// the counts back from a real scrape.
func TestLimiterScrape(t *testing.T) {
	lim := newConcurrency(t, concurrency.Config{Limit: 2})
	timed, c, err := Instrument("api", lim)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	var held []sluice.Permit
	for range 2 {
		p, err := timed.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	for range 3 {
		if _, err := timed.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("TryAcquire at the limit: %v", err)
		}
	}
	mfs := scrape(t, reg)
	mfs.check(t, []want{
		{"sluice_admitted_total", []string{"limiter", "api"}, 2},
		{"sluice_rejected_total", []string{"limiter", "api", "reason", "limit"}, 3},
		{"sluice_rejected_total", []string{"limiter", "api", "reason", "queue_full"}, 0},
		{"sluice_in_flight", []string{"limiter", "api"}, 2},
		{"sluice_queued", []string{"limiter", "api"}, 0},
		{"sluice_limit", []string{"limiter", "api"}, 2},
	})
	if n := len(mfs["sluice_rejected_total"].Metric); n != int(sluice.NumReasons)-1 {
		t.Errorf("%d rejection series, want every reason but unknown (%d)", n, sluice.NumReasons-1)
	}
	if h := mfs.metric(t, "sluice_acquire_wait_seconds").Histogram; h.GetSampleCount() != 2 || h.GetSampleSum() != 0 {
		t.Errorf("wait histogram: count %d sum %v, want 2 admissions at 0", h.GetSampleCount(), h.GetSampleSum())
	}

	for i := range held {
		held[i].Release(sluice.Success, time.Millisecond)
	}
	mfs = scrape(t, reg)
	mfs.check(t, []want{{"sluice_in_flight", []string{"limiter", "api"}, 0}})
}

// TestWaitHistogram times a queued Acquire in virtual time: the wait is
// exactly the 100 ms the permit was held, and lands in the right buckets.
func TestWaitHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newConcurrency(t, concurrency.Config{Limit: 1, MaxQueue: 1})
		timed, c, err := Instrument("q", lim, Buckets(0.05, 0.1, 0.2))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)

		first, err := timed.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan sluice.Permit)
		go func() {
			p, err := timed.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- p
		}()
		synctest.Wait()
		if q := gatherText(t, reg).value(t, "sluice_queued", "limiter", "q"); q != 1 {
			t.Fatalf("queued = %v, want 1", q)
		}
		time.Sleep(100 * time.Millisecond)
		first.Release(sluice.Success, 100*time.Millisecond)
		second := <-done
		second.Release(sluice.Success, 0)

		h := gatherText(t, reg).metric(t, "sluice_acquire_wait_seconds", "limiter", "q").Histogram
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 0.1 {
			t.Fatalf("count %d sum %v, want 2 and 0.1", h.GetSampleCount(), h.GetSampleSum())
		}
		wantCum := map[float64]uint64{0.05: 1, 0.1: 2, 0.2: 2, math.Inf(1): 2}
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() != wantCum[b.GetUpperBound()] {
				t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), wantCum[b.GetUpperBound()])
			}
		}
	})
}

func TestKeyedScrape(t *testing.T) {
	b, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewKeyedCollector("per-ip", b)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for _, key := range []string{"a", "b", "a", "c"} {
		b.TryAcquire(key) // a twice: one rejection; c does not fit: overflow
	}
	s := b.Stats()
	scrape(t, reg).check(t, []want{
		{"sluice_keys", []string{"limiter", "per-ip"}, float64(s.Keys)},
		{"sluice_keys_max", []string{"limiter", "per-ip"}, 2},
		{"sluice_keys_created_total", []string{"limiter", "per-ip"}, 2},
		{"sluice_keys_evicted_total", []string{"limiter", "per-ip"}, 0},
		{"sluice_keys_overflowed_total", []string{"limiter", "per-ip"}, 1},
		{"sluice_admitted_total", []string{"limiter", "per-ip"}, 3},
		{"sluice_rejected_total", []string{"limiter", "per-ip", "reason", "rate"}, 1},
	})
	if s.Keys != 2 {
		t.Errorf("keyed reports %d keys, want 2", s.Keys)
	}
}

func TestTransportScrape(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	// Two tokens and no refill: the first request takes one for its 503
	// and one for its retry; the second is throttled locally.
	bucket, err := rate.NewBucket(rate.Config{Rate: 0, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.NewTransport(client.TransportConfig{
		Base:    srv.Client().Transport,
		Limiter: bucket,
		Retry:   client.RetryPolicy{MaxAttempts: 2, Random: func() float64 { return 0 }},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewTransportCollector("backend", tr)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	hc := &http.Client{Transport: tr}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 after a retry", resp.StatusCode)
	}
	if _, err := hc.Get(srv.URL); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("second request: %v, want a local rejection", err)
	}
	scrape(t, reg).check(t, []want{
		{"sluice_client_requests_total", []string{"limiter", "backend"}, 2},
		{"sluice_client_retries_total", []string{"limiter", "backend"}, 1},
		{"sluice_client_retries_denied_total", []string{"limiter", "backend"}, 0},
		{"sluice_client_throttled_total", []string{"limiter", "backend"}, 1},
	})
	srv.Client().CloseIdleConnections()
}

func TestRetrierScrape(t *testing.T) {
	budget, err := client.NewRetryBudget(client.RetryBudgetConfig{Ratio: 1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.NewRetrier(client.RetryPolicy{MaxAttempts: 3, Budget: budget, Random: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewRetrierCollector("jobs", r)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	// One request may retry once (ratio 1); its second retry is denied.
	r.Do(context.Background(), func(context.Context) error { return errors.New("fail") })
	scrape(t, reg).check(t, []want{
		{"sluice_client_requests_total", []string{"limiter", "jobs"}, 1},
		{"sluice_client_retries_total", []string{"limiter", "jobs"}, 1},
		{"sluice_client_retries_denied_total", []string{"limiter", "jobs"}, 1},
	})
}

// TestLint runs promlint over every kind of collector.
func TestLint(t *testing.T) {
	lim := newConcurrency(t, concurrency.Config{Limit: 1})
	_, inst, err := Instrument("a", lim)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewCollector("b", lim)
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}})
	kc, _ := NewKeyedCollector("c", b)
	tr, _ := client.NewTransport(client.TransportConfig{})
	tc, _ := NewTransportCollector("d", tr)
	r, _ := client.NewRetrier(client.RetryPolicy{})
	rc, _ := NewRetrierCollector("e", r)
	for _, c := range []*Collector{inst, plain, kc, tc, rc} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

// TestRegistration: collectors of different names and kinds share a
// registry; a second collector with a taken name is refused.
func TestRegistration(t *testing.T) {
	lim := newConcurrency(t, concurrency.Config{Limit: 1})
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}})
	reg := prometheus.NewRegistry()
	a, _ := NewCollector("a", lim)
	_, inst, _ := Instrument("b", lim)
	k, _ := NewKeyedCollector("k", b)
	for _, c := range []prometheus.Collector{a, inst, k} {
		if err := reg.Register(c); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	again, _ := NewCollector("a", lim)
	if err := reg.Register(again); err == nil {
		t.Fatal("a second collector named a was registered")
	}
	mfs := scrape(t, reg)
	if n := len(mfs["sluice_admitted_total"].Metric); n != 3 {
		t.Errorf("%d sluice_admitted_total series, want 3", n)
	}
}

func TestConstructorErrors(t *testing.T) {
	lim := newConcurrency(t, concurrency.Config{Limit: 1})
	for _, tc := range []struct {
		name  string
		err   func() error
		field string
	}{
		{"empty name", func() error { _, err := NewCollector("", lim); return err }, "name"},
		{"bad UTF-8", func() error { _, err := NewCollector("\xff", lim); return err }, "UTF-8"},
		{"nil source", func() error { _, err := NewCollector("x", nil); return err }, "source"},
		{"nil limiter", func() error { _, _, err := Instrument("x", nil); return err }, "limiter"},
		{"no buckets", func() error { _, _, err := Instrument("x", lim, Buckets()); return err }, "Buckets"},
		{"unsorted buckets", func() error { _, _, err := Instrument("x", lim, Buckets(1, 0.5)); return err }, "Buckets"},
		{"nil keyed", func() error { _, err := NewKeyedCollector("x", nil); return err }, "source"},
		{"nil transport", func() error { _, err := NewTransportCollector("x", nil); return err }, "transport"},
		{"nil retrier", func() error { _, err := NewRetrierCollector("x", nil); return err }, "retrier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			var ce *sluice.ConfigError
			if !errors.Is(err, sluice.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Package != "promsluice" {
				t.Fatalf("%v is not a promsluice *sluice.ConfigError", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%q does not name %s", err, tc.field)
			}
		})
	}
}

// TestInstrumentedFastPathAllocs: the wrapper adds no allocation to an
// admission.
func TestInstrumentedFastPathAllocs(t *testing.T) {
	lim := newConcurrency(t, concurrency.Config{Limit: 1})
	timed, _, err := Instrument("a", lim)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := timed.Acquire(ctx)
		p.Release(sluice.Success, 0)
		p, _ = timed.TryAcquire()
		p.Release(sluice.Success, 0)
	}); n != 0 {
		t.Errorf("%v allocations per admission, want 0", n)
	}
}

// The sources the package doc promises, checked by the compiler.
var (
	_ Source      = (*netlimit.Listener)(nil)
	_ Source      = (*client.Throttler)(nil)
	_ Source      = (*rate.Bucket)(nil)
	_ KeyedSource = (*keyed.Map[*concurrency.Limiter])(nil)
	_ KeyedSource = (*keyed.Buckets)(nil)
)
