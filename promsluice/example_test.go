package promsluice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/rate"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// printMetrics prints the series of the named families in the text format
// a Prometheus server scrapes.
func printMetrics(reg *prometheus.Registry, names ...string) {
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				enc.Encode(mf)
			}
		}
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			fmt.Println(line)
		}
	}
}

func ExampleNewCollector() {
	lim, _ := concurrency.New(concurrency.Config{Limit: 10})
	c, err := promsluice.NewCollector("api", lim)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	p, _ := lim.TryAcquire()
	defer p.Release(sluice.Success, 0)
	printMetrics(reg, "sluice_admitted_total", "sluice_in_flight", "sluice_limit")
	// Output:
	// sluice_admitted_total{limiter="api"} 1
	// sluice_in_flight{limiter="api"} 1
	// sluice_limit{limiter="api"} 10
}

func ExampleInstrument() {
	lim, _ := concurrency.New(concurrency.Config{Limit: 1})
	timed, c, err := promsluice.Instrument("db", lim, promsluice.Buckets(0.01, 0.1, 1))
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	p, _ := timed.Acquire(context.Background()) // use timed wherever lim was used
	defer p.Release(sluice.Success, 0)
	_, err = timed.TryAcquire()
	fmt.Println(errors.Is(err, sluice.ErrLimit))
	printMetrics(reg, "sluice_rejected_total")
	// Output:
	// true
	// sluice_rejected_total{limiter="db",reason="deadline"} 0
	// sluice_rejected_total{limiter="db",reason="limit"} 1
	// sluice_rejected_total{limiter="db",reason="queue_full"} 0
	// sluice_rejected_total{limiter="db",reason="queue_timeout"} 0
	// sluice_rejected_total{limiter="db",reason="rate"} 0
	// sluice_rejected_total{limiter="db",reason="shed"} 0
	// sluice_rejected_total{limiter="db",reason="store"} 0
	// sluice_rejected_total{limiter="db",reason="throttled"} 0
	// sluice_rejected_total{limiter="db",reason="too_large"} 0
}

func ExampleBuckets() {
	lim, _ := concurrency.New(concurrency.Config{Limit: 1})
	timed, c, _ := promsluice.Instrument("db", lim, promsluice.Buckets(0.001, 0.01))
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	p, _ := timed.TryAcquire() // an admission without waiting: observed as 0
	p.Release(sluice.Success, 0)
	printMetrics(reg, "sluice_acquire_wait_seconds")
	// Output:
	// sluice_acquire_wait_seconds_bucket{limiter="db",le="0.001"} 1
	// sluice_acquire_wait_seconds_bucket{limiter="db",le="0.01"} 1
	// sluice_acquire_wait_seconds_bucket{limiter="db",le="+Inf"} 1
	// sluice_acquire_wait_seconds_sum{limiter="db"} 0
	// sluice_acquire_wait_seconds_count{limiter="db"} 1
}

func ExampleNewKeyedCollector() {
	perIP, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 10}, MaxKeys: 1000})
	c, err := promsluice.NewKeyedCollector("per-ip", perIP)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	perIP.Allow("192.0.2.1")
	perIP.Allow("192.0.2.2")
	printMetrics(reg, "sluice_keys", "sluice_keys_max")
	// Output:
	// sluice_keys{limiter="per-ip"} 2
	// sluice_keys_max{limiter="per-ip"} 1000
}

func ExampleNewTransportCollector() {
	backend := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer backend.Close()
	tr, _ := client.NewTransport(client.TransportConfig{Base: backend.Client().Transport})
	c, err := promsluice.NewTransportCollector("backend", tr)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	resp, err := (&http.Client{Transport: tr}).Get(backend.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	backend.Client().CloseIdleConnections()
	printMetrics(reg, "sluice_client_requests_total", "sluice_client_retries_total", "sluice_client_throttled_total")
	// Output:
	// sluice_client_requests_total{limiter="backend"} 1
	// sluice_client_retries_total{limiter="backend"} 0
	// sluice_client_throttled_total{limiter="backend"} 0
}

func ExampleNewRetrierCollector() {
	r, _ := client.NewRetrier(client.RetryPolicy{MaxAttempts: 2, Random: func() float64 { return 0 }})
	c, err := promsluice.NewRetrierCollector("jobs", r)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	tries := 0
	r.Do(context.Background(), func(context.Context) error {
		if tries++; tries == 1 {
			return errors.New("transient")
		}
		return nil
	})
	printMetrics(reg, "sluice_client_requests_total", "sluice_client_retries_total", "sluice_client_retries_denied_total")
	// Output:
	// sluice_client_requests_total{limiter="jobs"} 1
	// sluice_client_retries_denied_total{limiter="jobs"} 0
	// sluice_client_retries_total{limiter="jobs"} 1
}

func ExampleNewStoreCollector() {
	srv, err := redistest.Start() // in production: your Redis URL
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	store, err := redisstore.Open(srv.URL(), redisstore.Config{Timeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	buckets, _ := redisstore.NewBuckets(store, redisstore.RateConfig{Rate: 1, Burst: 1})
	sc, err := promsluice.NewStoreCollector("main", store)
	if err != nil {
		panic(err)
	}
	bc, err := promsluice.NewSharedCollector("api", buckets)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(sc, bc)
	buckets.TryAcquire("k") // admitted by Redis
	buckets.TryAcquire("k") // rejected by Redis: the key goes in the over-limit cache
	buckets.TryAcquire("k") // rejected from the cache, no round trip
	printMetrics(reg, "sluice_store_calls_total", "sluice_store_breaker_state", "sluice_store_cache_hits_total", "sluice_admitted_total")
	// Output:
	// sluice_admitted_total{limiter="api"} 1
	// sluice_store_breaker_state{store="main"} 0
	// sluice_store_cache_hits_total{limiter="api"} 1
	// sluice_store_calls_total{store="main"} 2
}
