package promsluice

import (
	"context"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// Option configures Instrument.
type Option func(*options)

type options struct {
	buckets []float64
}

// Buckets sets the upper bounds, in seconds, of the wait histogram's
// buckets: at least one, strictly increasing. Default prometheus.DefBuckets
// (0.005 to 10).
func Buckets(upper ...float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), upper...) }
}

// Limiter is a sluice.Limiter that times the wait of every admitted
// Acquire into the sluice_acquire_wait_seconds histogram of its Collector.
// It passes everything else through: permits are the wrapped limiter's,
// Stats are its Stats.
type Limiter struct {
	l    sluice.Limiter
	hist prometheus.Histogram
}

// Instrument wraps l so that Acquire's wait is observed, and returns the
// wrapper with a Collector of l's Stats and the histogram, labelled
// limiter=name. Only admissions are observed (a rejection's wait is not the
// wait to a permit); TryAcquire's admissions are observed as 0, so that the
// histogram's count is the admissions made through the wrapper.
func Instrument(name string, l sluice.Limiter, opts ...Option) (*Limiter, *Collector, error) {
	if l == nil {
		return nil, nil, invalid("limiter", nil, "must not be nil")
	}
	o := options{buckets: prometheus.DefBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkBuckets(o.buckets); err != nil {
		return nil, nil, err
	}
	c, err := NewCollector(name, l)
	if err != nil {
		return nil, nil, err
	}
	c.hist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "sluice_acquire_wait_seconds",
		Help:        "Time from Acquire to admission, for admitted calls.",
		ConstLabels: prometheus.Labels{"limiter": name},
		Buckets:     o.buckets,
	})
	return &Limiter{l: l, hist: c.hist}, c, nil
}

func checkBuckets(b []float64) error {
	if len(b) == 0 {
		return invalid("Buckets(upper)", nil, "must not be empty")
	}
	for i, v := range b {
		if math.IsNaN(v) || (i > 0 && v <= b[i-1]) {
			return invalid("Buckets(upper)", b, "must be strictly increasing bounds")
		}
	}
	return nil
}

// Acquire calls the wrapped limiter's Acquire and, if it admits, observes
// how long it took.
func (w *Limiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	start := clock.Nanos()
	p, err := w.l.Acquire(ctx)
	if err == nil {
		w.hist.Observe(float64(clock.Nanos()-start) / 1e9)
	}
	return p, err
}

// TryAcquire calls the wrapped limiter's TryAcquire; an admission is
// observed as a wait of 0.
func (w *Limiter) TryAcquire() (sluice.Permit, error) {
	p, err := w.l.TryAcquire()
	if err == nil {
		w.hist.Observe(0)
	}
	return p, err
}

// Stats returns the wrapped limiter's Stats.
func (w *Limiter) Stats() sluice.Stats { return w.l.Stats() }

// Unwrap returns the wrapped limiter.
func (w *Limiter) Unwrap() sluice.Limiter { return w.l }
