package promsluice

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
	"github.com/sluicehq/sluice/redisstore"
)

// sharedStub is a SharedSource without Redis: Describe reads nothing.
type sharedStub struct{ sluice.Limiter }

func (sharedStub) LimiterStats() redisstore.LimiterStats { return redisstore.LimiterStats{} }

// The package doc's table is where an operator looks up a series: every
// metric a collector describes must be in it.
func TestDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//")); len(f) > 0 && strings.HasPrefix(f[0], "sluice_") {
			listed[f[0]] = true
		}
	}
	lim := newConcurrency(t, concurrency.Config{Limit: 1})
	_, inst, err := Instrument("a", lim)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}})
	tr, _ := client.NewTransport(client.TransportConfig{})
	r, _ := client.NewRetrier(client.RetryPolicy{})
	kc, _ := NewKeyedCollector("c", b)
	tc, _ := NewTransportCollector("d", tr)
	rc, _ := NewRetrierCollector("e", r)
	sc, err := NewStoreCollector("f", &redisstore.Store{})
	if err != nil {
		t.Fatal(err)
	}
	shc, err := NewSharedCollector("g", sharedStub{lim})
	if err != nil {
		t.Fatal(err)
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 100)
	for _, c := range []*Collector{inst, kc, tc, rc, sc, shc} {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		if !listed[m[1]] {
			t.Errorf("%s is not in the package doc's table of metrics", m[1])
		}
	}
}
