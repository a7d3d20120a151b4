package promsluice

import (
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// invalid is the error for a bad argument: a *sluice.ConfigError, which
// matches sluice.ErrInvalidConfig.
func invalid(field string, v any, allowed string) error {
	return sluice.NewConfigError("promsluice", field, v, allowed)
}

// Source is what NewCollector reads at each scrape. Every sluice.Limiter
// and a netlimit.Listener are Sources. Stats must be cheap and safe for
// concurrent use, as the limiters' are.
type Source interface {
	Stats() sluice.Stats
}

// Collector is a prometheus.Collector for one named limiter, client or key
// table. Register it with a prometheus.Registerer. It is safe for
// concurrent use.
type Collector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
	hist    prometheus.Histogram // nil unless made by Instrument
}

// NewCollector returns a Collector of src's Stats, labelled limiter=name.
func NewCollector(name string, src Source) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, invalid("source", nil, "must not be nil")
	}
	m := newLimiterMetrics(name)
	return &Collector{
		descs:   m.descs(),
		collect: func(ch chan<- prometheus.Metric) { m.collect(ch, src.Stats()) },
	}, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	if c.hist != nil {
		c.hist.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it reads the source's Stats once.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.collect(ch)
	if c.hist != nil {
		ch <- c.hist
	}
}

func checkName(name string) error {
	if name == "" {
		return invalid("name", nil, "must not be empty: it is the limiter label's value")
	}
	if !utf8.ValidString(name) {
		return invalid("name", strconv.Quote(name), "must be valid UTF-8")
	}
	return nil
}

// desc makes a Desc with the constant limiter label: metrics of collectors
// with different names then have different Desc IDs and share a registry.
// Every collector kind builds the same fqName with the same help and
// labels, as the registry requires.
func desc(fqName, help, name string, variable ...string) *prometheus.Desc {
	return prometheus.NewDesc(fqName, help, variable, prometheus.Labels{"limiter": name})
}

// limiterMetrics are the metrics of sluice.Stats.
type limiterMetrics struct {
	admitted, rejected, inFlight, queued, limit *prometheus.Desc
}

func newLimiterMetrics(name string) *limiterMetrics {
	return &limiterMetrics{
		admitted: desc("sluice_admitted_total", "Permits granted.", name),
		rejected: desc("sluice_rejected_total", "Requests rejected, by reason.", name, "reason"),
		inFlight: desc("sluice_in_flight", "Permits held now.", name),
		queued:   desc("sluice_queued", "Callers waiting for a permit now.", name),
		limit:    desc("sluice_limit", "The current limit: permits in flight for a concurrency limit, events per second for a rate limit.", name),
	}
}

func (m *limiterMetrics) descs() []*prometheus.Desc {
	return []*prometheus.Desc{m.admitted, m.rejected, m.inFlight, m.queued, m.limit}
}

func (m *limiterMetrics) collect(ch chan<- prometheus.Metric, s sluice.Stats) {
	ch <- prometheus.MustNewConstMetric(m.admitted, prometheus.CounterValue, float64(s.Admitted))
	for r, n := range s.Rejected {
		// Unknown is not a reason any limiter gives; export it only if
		// one ever did, so that it shows rather than hides.
		if sluice.Reason(r) == sluice.ReasonUnknown && n == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(n), sluice.Reason(r).String())
	}
	ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, s.Limit)
}
