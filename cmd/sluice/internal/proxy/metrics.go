package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/promsluice"
)

// metrics are the proxy's own Prometheus metrics, and a collector that
// reads the limiters of whatever config is serving at scrape time.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	abandoned *prometheus.GaugeVec
	reloads   *prometheus.CounterVec
	reloadOK  prometheus.Gauge
	reloadAt  prometheus.Gauge
	admission *prometheus.Desc

	mu     sync.Mutex
	routes map[string]*routeMetrics
}

func newMetrics(current func() *state) *metrics {
	m := &metrics{
		routes: map[string]*routeMetrics{},
		reg:    prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_proxy_requests_total",
			Help: "Requests answered, by route and status (route \"\" is no route matched).",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_proxy_request_duration_seconds",
			Help:    "Time from the request to the end of its answer, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		abandoned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_proxy_abandoned_requests",
			Help: "Requests whose client went away while the upstream still works on them (on_client_gone: wait): work nobody waits for, by route.",
		}, []string{"route"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_proxy_config_reloads_total",
			Help: "Config reloads, by result (success, failure: the old config kept serving).",
		}, []string{"result"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_proxy_config_last_reload_successful",
			Help: "1 if the last config reload (or the start) succeeded, 0 if it was refused.",
		}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_proxy_config_last_reload_success_timestamp_seconds",
			Help: "When the serving config was loaded, Unix seconds.",
		}),
		admission: prometheus.NewDesc("sluice_proxy_admission_total",
			"Requests through a route's policy, by result: admitted, rejected_<reason>, would_reject_<reason> (dry run), canceled (client left while waiting), error.",
			[]string{"route", "result"}, nil),
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.reg.MustRegister(m.requests, m.duration, m.abandoned, m.reloads, m.reloadOK, m.reloadAt,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&liveCollector{m: m, current: current})
	return m
}

// routeMetrics are one route's series, looked up once rather than per
// request (a label lookup hashes the values and takes a lock).
type routeMetrics struct {
	m         *metrics
	route     string
	dur       prometheus.Observer
	abandoned prometheus.Gauge
	codes     [600]atomic.Pointer[prometheus.Counter] // by status
}

// forRoute returns the series of the route named route, shared by its
// versions across reloads.
func (m *metrics) forRoute(route string) *routeMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rm := m.routes[route]; rm != nil {
		return rm
	}
	rm := &routeMetrics{m: m, route: route, dur: m.duration.WithLabelValues(route), abandoned: m.abandoned.WithLabelValues(route)}
	m.routes[route] = rm
	return rm
}

func (rm *routeMetrics) observe(status int, d time.Duration) {
	rm.dur.Observe(d.Seconds())
	if status < 0 || status >= len(rm.codes) {
		rm.m.requests.WithLabelValues(rm.route, strconv.Itoa(status)).Inc()
		return
	}
	c := rm.codes[status].Load()
	if c == nil {
		cnt := rm.m.requests.WithLabelValues(rm.route, strconv.Itoa(status))
		c = &cnt
		rm.codes[status].Store(c)
	}
	(*c).Inc()
}

func (m *metrics) reloaded(ok bool) {
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.reloadOK.Set(1)
		m.reloadAt.Set(float64(time.Now().UnixNano()) / 1e9)
	} else {
		m.reloads.WithLabelValues("failure").Inc()
		m.reloadOK.Set(0)
	}
}

// forget drops the series of a route that a reload removed.
func (m *metrics) forget(route string) {
	m.mu.Lock()
	delete(m.routes, route)
	m.mu.Unlock()
	m.requests.DeletePartialMatch(prometheus.Labels{"route": route})
	m.duration.DeleteLabelValues(route)
	m.abandoned.DeleteLabelValues(route)
}

// liveCollector reads the serving config's limiters at each scrape, so
// that a reload needs no registration: the promsluice collectors of every
// policy (limiter="POLICY/PART") and every store (store="NAME"), and the
// httplimit counters of every route. It describes nothing (an unchecked
// collector), since the set changes with the config.
type liveCollector struct {
	m       *metrics
	current func() *state
}

func (c *liveCollector) Describe(chan<- *prometheus.Desc) {}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.current()
	if st == nil {
		return
	}
	for _, p := range st.policyList {
		for _, col := range p.collectors {
			col.Collect(ch)
		}
	}
	for _, s := range st.storeList {
		s.metrics.Collect(ch)
	}
	for _, rt := range st.routes {
		if rt.limit == nil {
			continue
		}
		s := rt.limit.Stats()
		emit := func(result string, n uint64) {
			ch <- prometheus.MustNewConstMetric(c.m.admission, prometheus.CounterValue, float64(n), rt.name, result)
		}
		emit("admitted", s.Admitted)
		emit("canceled", s.Canceled)
		emit("error", s.Errors)
		for r := range sluice.NumReasons {
			if s.Rejected[r] != 0 {
				emit("rejected_"+sluice.Reason(r).String(), s.Rejected[r])
			}
			if s.WouldReject[r] != 0 {
				emit("would_reject_"+sluice.Reason(r).String(), s.WouldReject[r])
			}
		}
	}
}

// sharedRatePart names a shared bucket in the limiter label, as the
// in-process ones are named.
func (p *policy) sharedRatePart() string {
	if p.spec.Rate.PerKey {
		return "per_key_rate"
	}
	return "rate"
}

// newCollectors makes the promsluice collectors of p's limiters.
func (p *policy) newCollectors() error {
	add := func(part string, src promsluice.Source) error {
		col, err := promsluice.NewCollector(p.name+"/"+part, src)
		p.collectors = append(p.collectors, col)
		return err
	}
	addShared := func(part string, src promsluice.SharedSource) error {
		col, err := promsluice.NewSharedCollector(p.name+"/"+part, src)
		p.collectors = append(p.collectors, col)
		return err
	}
	addKeyed := func(part string, src promsluice.KeyedSource) error {
		col, err := promsluice.NewKeyedCollector(p.name+"/"+part, src)
		p.collectors = append(p.collectors, col)
		return err
	}
	var err error
	if p.bucket != nil {
		err = add("rate", p.bucket)
	}
	if p.conc != nil && err == nil {
		err = add("concurrency", p.conc)
	}
	if p.buckets != nil && err == nil {
		err = addKeyed("per_key_rate", p.buckets)
	}
	if p.perKeyConc != nil && err == nil {
		err = addKeyed("per_key_concurrency", p.perKeyConc)
	}
	if p.sharedRate != nil && err == nil {
		err = addShared(p.sharedRatePart(), p.sharedRate)
	}
	if p.sharedConc != nil && err == nil {
		err = addShared("concurrency", p.sharedConc)
	}
	return err
}
