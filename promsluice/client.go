package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
)

// clientMetrics are the metrics of client.RetryStats.
type clientMetrics struct {
	requests, retries, denied *prometheus.Desc
}

func newClientMetrics(name string) *clientMetrics {
	return &clientMetrics{
		requests: desc("sluice_client_requests_total", "Requests started by a client, retries not counted.", name),
		retries:  desc("sluice_client_retries_total", "Attempts after the first.", name),
		denied:   desc("sluice_client_retries_denied_total", "Retries the retry budget refused.", name),
	}
}

func (m *clientMetrics) collect(ch chan<- prometheus.Metric, s client.RetryStats) {
	ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(m.retries, prometheus.CounterValue, float64(s.Retries))
	ch <- prometheus.MustNewConstMetric(m.denied, prometheus.CounterValue, float64(s.BudgetDenied))
}

// NewTransportCollector returns a Collector of a client.Transport's
// counters: requests, retries, retries denied by the budget, and attempts
// its Limiter rejected locally (sluice_client_throttled_total). To see the
// Limiter's own state, collect it too, under another name.
func NewTransportCollector(name string, t *client.Transport) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, invalid("transport", nil, "must not be nil")
	}
	m := newClientMetrics(name)
	throttled := desc("sluice_client_throttled_total", "Attempts rejected locally by the client's limiter or throttler.", name)
	return &Collector{
		descs: []*prometheus.Desc{m.requests, m.retries, m.denied, throttled},
		collect: func(ch chan<- prometheus.Metric) {
			s := t.Stats()
			m.collect(ch, s.RetryStats)
			ch <- prometheus.MustNewConstMetric(throttled, prometheus.CounterValue, float64(s.Rejected))
		},
	}, nil
}

// NewRetrierCollector returns a Collector of a client.Retrier's counters:
// requests, retries and retries denied by the budget. (A Throttler is a
// sluice.Limiter: collect it with NewCollector; its local rejections are
// sluice_rejected_total{reason="throttled"}.)
func NewRetrierCollector(name string, r *client.Retrier) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, invalid("retrier", nil, "must not be nil")
	}
	m := newClientMetrics(name)
	return &Collector{
		descs:   []*prometheus.Desc{m.requests, m.retries, m.denied},
		collect: func(ch chan<- prometheus.Metric) { m.collect(ch, r.Stats()) },
	}, nil
}
