package origin

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// initMetrics builds the Server's own registry, so that several Servers in
// one process (a lab run) do not collide.
func (s *Server) initMetrics() {
	s.reg = prometheus.NewRegistry()
	gauge := func(name, help string, f func(Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_origin_" + name, Help: help},
			func() float64 { return f(s.Stats()) })
	}
	counter := func(result string, f func(Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "sluice_origin_requests_total",
			Help:        "Requests answered by the origin, by result.",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(f(s.Stats())) })
	}
	s.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_origin_request_duration_seconds",
		Help:    "Time from a request's arrival at the origin to its answer, queue included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms to 16 s
	})
	s.reg.MustRegister(
		gauge("in_flight", "Requests in service (holding a worker).", func(st Stats) float64 { return float64(st.Busy) }),
		gauge("queued", "Requests waiting for a worker.", func(st Stats) float64 { return float64(st.Queued) }),
		gauge("workers", "Workers now.", func(st Stats) float64 { return float64(st.Workers) }),
		gauge("max_in_flight", "Most requests inside the origin at once since it started.", func(st Stats) float64 { return float64(st.MaxInFlight) }),
		counter("served", func(st Stats) uint64 { return st.Served }),
		counter("error", func(st Stats) uint64 { return st.Errors }),
		counter("refused", func(st Stats) uint64 { return st.Refused }),
		counter("timeout", func(st Stats) uint64 { return st.TimedOut }),
		s.latency,
	)
}

// Registry returns the Server's Prometheus registry, for a caller that
// serves it on a port of its own or adds collectors to it.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler returns a handler that serves /metrics (the Prometheus
// exposition of Registry) and passes every other path to s.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.Handle("/", s)
	return mux
}
