package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/redisstore"
)

// NewStoreCollector returns a Collector of a redisstore.Store: its round
// trips as a histogram, its calls, errors and timeouts, the circuit
// breaker's state, trips and refusals, the live replicas, and the merged
// calls Redis refused with CROSSSLOT. Its series
// have the constant label store=name, not limiter: a store serves many
// limiters (collect those with NewSharedCollector).
func NewStoreCollector(name string, s *redisstore.Store) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, invalid("store", nil, "must not be nil")
	}
	d := func(fqName, help string) *prometheus.Desc {
		return prometheus.NewDesc(fqName, help, nil, prometheus.Labels{"store": name})
	}
	roundTrip := d("sluice_store_round_trip_seconds", "Store calls as the limiters waited for them, queueing for a pipeline included.")
	calls := d("sluice_store_calls_total", "Store calls sent to Redis.")
	roundTrips := d("sluice_store_round_trips_total", "Round trips to Redis: calls sent alone and pipelines.")
	errs := d("sluice_store_errors_total", "Store calls that failed, timeouts included.")
	timeouts := d("sluice_store_timeouts_total", "Store calls that failed by the per-call timeout.")
	shorted := d("sluice_store_breaker_rejects_total", "Store calls refused at once by the open circuit breaker.")
	trips := d("sluice_store_breaker_trips_total", "Times the circuit breaker opened.")
	state := d("sluice_store_breaker_state", "The circuit breaker's state: 0 closed (calls go to Redis), 1 open (calls go to the failure policy), 2 half-open (one probe).")
	replicas := d("sluice_store_replicas", "Live replicas counted by the heartbeat (1 without one).")
	crossSlot := d("sluice_store_cross_slot_total", "Merged script calls refused with CROSSSLOT: the endpoint is a cluster behind one address, and the store stopped merging.")
	return &Collector{
		descs: []*prometheus.Desc{roundTrip, calls, roundTrips, errs, timeouts, shorted, trips, state, replicas, crossSlot},
		collect: func(ch chan<- prometheus.Metric) {
			st := s.Stats()
			counter := func(d *prometheus.Desc, v uint64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
			}
			counter(calls, st.Calls)
			counter(roundTrips, st.RoundTrips)
			counter(errs, st.Errors)
			counter(timeouts, st.Timeouts)
			counter(shorted, st.BreakerRejects)
			counter(trips, st.BreakerTrips)
			counter(crossSlot, st.CrossSlot)
			ch <- prometheus.MustNewConstMetric(state, prometheus.GaugeValue, float64(st.Breaker))
			ch <- prometheus.MustNewConstMetric(replicas, prometheus.GaugeValue, float64(st.Replicas))
			// redisstore's buckets are not cumulative and its last one has
			// no bound (+Inf): Prometheus wants cumulative counts by bound.
			buckets := make(map[float64]uint64, len(st.RoundTrip))
			var total uint64
			for _, b := range st.RoundTrip {
				total += b.Count
				if b.UpperBound > 0 {
					buckets[b.UpperBound.Seconds()] = total
				}
			}
			ch <- prometheus.MustNewConstHistogram(roundTrip, total, st.RoundTripSum.Seconds(), buckets)
		},
	}, nil
}

// SharedSource is what NewSharedCollector reads: a redisstore limiter
// (*redisstore.Buckets, *redisstore.Concurrency,
// *redisstore.KeyedConcurrency).
type SharedSource interface {
	Source
	LimiterStats() redisstore.LimiterStats
}

// NewSharedCollector returns a Collector of a limiter shared through
// Redis: the limiter metrics (admissions and rejections over all its keys),
// and the decisions its failure policy made, the rejections its
// over-limit cache answered, the admissions spent from batched tokens and
// the leases lost at renewal.
func NewSharedCollector(name string, src SharedSource) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, invalid("source", nil, "must not be nil")
	}
	m := newLimiterMetrics(name)
	fallbacks := desc("sluice_store_fallbacks_total", "Decisions made by the failure policy because the store did not answer.", name)
	cacheHits := desc("sluice_store_cache_hits_total", "Rejections answered from the over-limit cache, without a round trip.", name)
	local := desc("sluice_store_local_admits_total", "Admissions spent from tokens the batched mode took ahead.", name)
	lost := desc("sluice_store_leases_lost_total", "Leases a renewal found gone from Redis (expired, or lost by a flush or restart) while their holder still ran, and added back.", name)
	return &Collector{
		descs: append(m.descs(), fallbacks, cacheHits, local, lost),
		collect: func(ch chan<- prometheus.Metric) {
			m.collect(ch, src.Stats())
			s := src.LimiterStats()
			ch <- prometheus.MustNewConstMetric(fallbacks, prometheus.CounterValue, float64(s.Fallbacks))
			ch <- prometheus.MustNewConstMetric(cacheHits, prometheus.CounterValue, float64(s.CacheHits))
			ch <- prometheus.MustNewConstMetric(local, prometheus.CounterValue, float64(s.Local))
			ch <- prometheus.MustNewConstMetric(lost, prometheus.CounterValue, float64(s.Lost))
		},
	}, nil
}
