package origin

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluicehq/sluice/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMetrics serves the origin on a real socket, sends it more than it
// takes, and reads /metrics back with Prometheus's own parser.
func TestMetrics(t *testing.T) {
	s, err := New(Config{ErrorRate: 0.5, Seed: 2, Origin: sim.Origin{Workers: 2, Queue: 2, Service: sim.Dist{Kind: sim.Constant, Mean: 100 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	// 10 requests at once: 2 served, 2 queued, 6 refused.
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for range 10 {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/work")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[503] != 6 || n[200]+n[500] != 4 {
		t.Errorf("answers %v, want 4 served (200 or 500) and 6 refused", n)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	byResult := map[string]float64{}
	for _, m := range fams["sluice_origin_requests_total"].GetMetric() {
		byResult[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	st := s.Stats()
	if byResult["served"] != float64(st.Served) || byResult["error"] != float64(st.Errors) || byResult["refused"] != 6 || byResult["timeout"] != 0 {
		t.Errorf("requests_total %v, stats %+v", byResult, st)
	}
	if byResult["served"]+byResult["error"] != 4 {
		t.Errorf("served + error = %v, want 4", byResult["served"]+byResult["error"])
	}
	if h := fams["sluice_origin_request_duration_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 10 {
		t.Errorf("latency histogram: %d samples, want 10", h.GetSampleCount())
	}
	for name, want := range map[string]float64{"sluice_origin_workers": 2, "sluice_origin_in_flight": 0, "sluice_origin_queued": 0} {
		if got := fams[name].GetMetric()[0].GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := fams["sluice_origin_max_in_flight"].GetMetric()[0].GetGauge().GetValue(); got < 4 {
		t.Errorf("max_in_flight = %v, want at least the 4 admitted", got)
	}
}
