package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/keyed"
)

// KeyedSource is what NewKeyedCollector reads: a *keyed.Map or a
// *keyed.Buckets.
type KeyedSource interface {
	Stats() keyed.Stats
}

// NewKeyedCollector returns a Collector of a per-key limiter's Stats: the
// limiter metrics of its admissions and rejections over all keys, and its
// key table (live keys, the cap, keys created, evicted and overflowed).
func NewKeyedCollector(name string, src KeyedSource) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, invalid("source", nil, "must not be nil")
	}
	m := newLimiterMetrics(name)
	keys := desc("sluice_keys", "Live keys in a per-key limiter.", name)
	maxKeys := desc("sluice_keys_max", "The most keys a per-key limiter keeps.", name)
	created := desc("sluice_keys_created_total", "Keys stored by a per-key limiter.", name)
	evicted := desc("sluice_keys_evicted_total", "Idle keys evicted to make room.", name)
	overflowed := desc("sluice_keys_overflowed_total", "Lookups of new keys that did not fit and went to the overflow limiter.", name)
	return &Collector{
		descs: append(m.descs(), keys, maxKeys, created, evicted, overflowed),
		collect: func(ch chan<- prometheus.Metric) {
			s := src.Stats()
			m.collect(ch, s.Stats)
			ch <- prometheus.MustNewConstMetric(keys, prometheus.GaugeValue, float64(s.Keys))
			ch <- prometheus.MustNewConstMetric(maxKeys, prometheus.GaugeValue, float64(s.MaxKeys))
			ch <- prometheus.MustNewConstMetric(created, prometheus.CounterValue, float64(s.Created))
			ch <- prometheus.MustNewConstMetric(evicted, prometheus.CounterValue, float64(s.Evicted))
			ch <- prometheus.MustNewConstMetric(overflowed, prometheus.CounterValue, float64(s.Overflowed))
		},
	}, nil
}
