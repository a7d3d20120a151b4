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
	switch p.Kind {
	case sim.None, "":
		return b, nil
	case sim.Concurrency, sim.Adaptive:
		cfg, err := p.ConcurrencyConfig()
		if err != nil {
			return b, err
		}
		l, err := concurrency.New(cfg)
		if err != nil {
			return b, err
		}
		b.limiter = l
	case sim.TokenBucket:
		bk, err := rate.NewBucket(rate.Config{Rate: p.Rate, Burst: max(p.Burst, 1), MaxWait: p.MaxWait})
		if err != nil {
			return b, err
		}
		b.limiter = bk
		// In the simulator a bucket without max_wait never waits; the
		// real one would wait as long as the context allows.
		b.noWait = p.MaxWait == 0
	case sim.Ticker:
		t := newTicker(p.Rate, p.Burst, p.Queue, p.MaxWait)
		b.limiter, b.close = t, t.Close
	default:
		return b, fmt.Errorf("policy %q: kind %q cannot run on sockets", p.Name, p.Kind)
	}
	return b, nil
}
