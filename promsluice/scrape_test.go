package promsluice

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families is a parsed scrape.
type families map[string]*dto.MetricFamily

// scrape serves reg with promhttp on a real loopback server, fetches it
// as a Prometheus server would, and parses the text format with expfmt.
func scrape(t *testing.T, reg *prometheus.Registry) families {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	return parse(t, resp.Body)
}

// gatherText encodes reg's metrics in the text format without a network,
// for synctest bubbles, which cannot wait on real sockets.
func gatherText(t *testing.T, reg *prometheus.Registry) families {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, &buf)
}

func parse(t *testing.T, r io.Reader) families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return mfs
}

// metric returns the series of family name whose labels include labels
// (given as name, value pairs), failing if there is not exactly one.
func (f families) metric(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	mf, ok := f[name]
	if !ok {
		t.Fatalf("no family %s in the scrape", name)
	}
	var found *dto.Metric
	for _, m := range mf.Metric {
		if hasLabels(m, labels) {
			if found != nil {
				t.Fatalf("%s%v matches more than one series", name, labels)
			}
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no series %s%v", name, labels)
	}
	return found
}

// value returns the value of a counter or gauge series.
func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := f.metric(t, name, labels...)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, lp := range m.Label {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// want checks series values: each entry is a family name, its labels and
// the value it must have.
type want struct {
	name   string
	labels []string
	value  float64
}

func (f families) check(t *testing.T, ws []want) {
	t.Helper()
	for _, w := range ws {
		if got := f.value(t, w.name, w.labels...); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
}
