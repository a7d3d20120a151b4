package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// BenchmarkRun is the generator's cost per request against a trivial
// loopback server in the same process: b.N requests offered at 20,000/s
// over 50 connections. It reports how many sends were late or skipped:
// a generator that cannot keep 20,000/s here shows it there.
// scripts/bench-load.sh measures it against wrk with the server apart.
func BenchmarkRun(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello\n")) }))
	defer srv.Close()
	const rate = 20_000
	b.ReportAllocs()
	b.ResetTimer()
	d := max(time.Duration(b.N)*time.Second/rate, 10*time.Millisecond)
	res, err := Run(context.Background(), Config{URL: srv.URL, Load: sim.Load{Rate: rate}, Duration: d, Connections: 50})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if res.OK != res.Sent {
		b.Errorf("%d sent, %d 2xx", res.Sent, res.OK)
	}
	b.ReportMetric(float64(res.Skipped)/float64(res.Planned)*100, "%skipped")
	b.ReportMetric(float64(res.Late)/float64(res.Planned)*100, "%late")
	b.ReportMetric(res.Throughput, "req/s")
}
