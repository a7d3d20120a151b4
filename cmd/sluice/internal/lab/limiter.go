package lab

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
	"github.com/sluicehq/sluice/sim"
)

// built is a scenario policy made real: the limiter to put in front of the
// origin (nil for none), whether the middleware must not wait, and what to
// close after the run.
type built struct {
	limiter sluice.Limiter
	noWait  bool
	close   func()
}

// buildPolicy makes the limiter a scenario policy describes from the same
// settings the simulator runs it with.
func buildPolicy(p sim.Policy) (built, error) {
	b := built{close: func() {}}
	switch q := p.(type) {
	case sim.NonePolicy:
		return b, nil
	case interface {
		ConcurrencyConfig() (concurrency.Config, error)
	}: // a static or an adaptive limit
		cfg, err := q.ConcurrencyConfig()
		if err != nil {
			return b, err
		}
		l, err := concurrency.New(cfg)
		if err != nil {
			return b, err
		}
		b.limiter = l
	case sim.TokenBucketPolicy:
		bk, err := rate.NewBucket(rate.Config{Rate: q.Rate, Burst: max(q.Burst, 1), MaxWait: q.MaxWait})
		if err != nil {
			return b, err
		}
		b.limiter = bk
		// In the simulator a bucket without max_wait never waits; the
		// real one would wait as long as the context allows.
		b.noWait = q.MaxWait == 0
	case sim.TickerPolicy:
		t := newTicker(q.Rate, q.Burst, q.Queue, q.MaxWait)
		b.limiter, b.close = t, t.Close
	default:
		return b, fmt.Errorf("policy %q: kind %q cannot run on sockets", p.Label(), p.Kind())
	}
	return b, nil
}
