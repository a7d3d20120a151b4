package promsluice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// A store and its limiters against a real redis-server, scraped over
// HTTP and parsed with expfmt: every series is the store's or limiter's
// counter at the scrape, the histogram counts every call, and a paused
// Redis shows as timeouts, an open breaker and fallbacks.
func TestRedisScrape(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s, err := redisstore.Open(rs.URL(), redisstore.Config{Timeout: 50 * time.Millisecond, BreakerThreshold: 2, BreakerCooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := redisstore.NewBuckets(s, redisstore.RateConfig{Rate: 1.0 / 3600, Burst: 2, Failure: redisstore.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	conc, err := redisstore.NewKeyedConcurrency(s, redisstore.ConcurrencyConfig{Key: "scrape", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer conc.Close()
	sc, err := NewStoreCollector("main", s)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := NewSharedCollector("api", b)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := NewSharedCollector("per-tenant", conc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(sc, bc, cc)

	for range 4 { // 2 admitted, 1 rejected by Redis, 1 by the over-limit cache
		b.TryAcquire("k")
	}
	p, err := conc.TryAcquire("t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conc.TryAcquire("t1"); err == nil {
		t.Fatal("second lease of a limit of 1")
	}
	p.Release(sluice.Success, 0)
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // 2 timeouts open the breaker, 1 refused by it: 3 fallbacks
		b.TryAcquire("other")
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}

	st, ls := s.Stats(), b.LimiterStats()
	if st.Timeouts != 2 || st.Breaker != redisstore.BreakerOpen || st.BreakerRejects != 1 || ls.Fallbacks != 3 || ls.CacheHits != 1 {
		t.Fatalf("the scenario did not happen: store %+v, limiter %+v", st, ls)
	}
	f := scrape(t, reg)
	store := []string{"store", "main"}
	f.check(t, []want{
		{"sluice_store_calls_total", store, float64(st.Calls)},
		{"sluice_store_round_trips_total", store, float64(st.RoundTrips)},
		{"sluice_store_errors_total", store, float64(st.Errors)},
		{"sluice_store_timeouts_total", store, 2},
		{"sluice_store_breaker_rejects_total", store, 1},
		{"sluice_store_breaker_trips_total", store, 1},
		{"sluice_store_breaker_state", store, 1},
		{"sluice_store_replicas", store, 1},
		{"sluice_store_cross_slot_total", store, float64(st.CrossSlot)},
		{"sluice_admitted_total", []string{"limiter", "api"}, 2},
		{"sluice_rejected_total", []string{"limiter", "api", "reason", "rate"}, 2},
		{"sluice_rejected_total", []string{"limiter", "api", "reason", "store"}, 3},
		{"sluice_store_fallbacks_total", []string{"limiter", "api"}, 3},
		{"sluice_store_cache_hits_total", []string{"limiter", "api"}, 1},
		{"sluice_admitted_total", []string{"limiter", "per-tenant"}, 1},
		{"sluice_rejected_total", []string{"limiter", "per-tenant", "reason", "limit"}, 1},
		{"sluice_store_leases_lost_total", []string{"limiter", "per-tenant"}, 0},
	})
	h := f.metric(t, "sluice_store_round_trip_seconds", store...).Histogram
	if h == nil {
		t.Fatal("sluice_store_round_trip_seconds is not a histogram")
	}
	if h.GetSampleCount() != st.Calls {
		t.Errorf("histogram counts %d calls, the store %d", h.GetSampleCount(), st.Calls)
	}
	// The two timeouts took at least 50 ms less the store's margin: both
	// in buckets above 16 ms, and in the sum.
	var under uint64
	for _, bk := range h.Bucket {
		if bk.GetUpperBound() <= 0.016 {
			under = bk.GetCumulativeCount()
		}
	}
	if st.Calls-under < 2 || h.GetSampleSum() < 2*0.025 {
		t.Errorf("the timeouts are not in the histogram: %d calls above 16 ms, sum %vs", st.Calls-under, h.GetSampleSum())
	}
	for _, c := range []*Collector{sc, bc, cc} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestRedisConstructorErrors(t *testing.T) {
	for _, tc := range []struct {
		err   error
		field string
	}{
		{func() error { _, err := NewStoreCollector("x", nil); return err }(), "store"},
		{func() error { _, err := NewSharedCollector("x", nil); return err }(), "source"},
		{func() error { _, err := NewStoreCollector("", &redisstore.Store{}); return err }(), "name"},
	} {
		if !errors.Is(tc.err, sluice.ErrInvalidConfig) || !strings.Contains(tc.err.Error(), tc.field) {
			t.Errorf("want a config error naming %s, got %v", tc.field, tc.err)
		}
	}
}
