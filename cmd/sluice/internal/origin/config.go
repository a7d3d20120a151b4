package origin

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/timescale"
	"github.com/sluicehq/sluice/sim"
)

// Config configures a Server.
type Config struct {
	// Origin is the model: workers, queue, timeout, service-time
	// distribution and changes, as in a scenario file's origin: section
	// (sim.Origin documents each field). Workers and Service are required.
	sim.Origin
	// TimeScale multiplies every duration of Origin: the service times, the
	// change times and the timeout. Default (0) 1; must be in (0, 1000],
	// and no scaled duration may exceed the longest time.Duration (about
	// 292 years).
	TimeScale float64
	// ErrorRate is the fraction of served requests answered with 500
	// instead of 200, in [0, 1]. The work is done either way. Default 0.
	ErrorRate float64
	// Seed seeds the service-time and error draws, so that two servers
	// with the same Seed draw the same sequence; with a scenario's seed the
	// service times are the simulator's (sim.ServiceRand), drawn in the
	// order requests start service. Default 0, a seed like any other; the
	// command picks a random one when given none.
	Seed uint64
}

// Validate reports what New would refuse in c, starting nothing.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate checks c and returns it with its durations scaled. Field names
// follow the scenario file's keys (origin.workers), so that a flag and a
// file report the same field.
func (c Config) validate() (Config, error) {
	bad := func(field string, v any, allowed string) (Config, error) {
		return c, sluice.NewConfigError("origin", field, v, allowed)
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	switch {
	case !(c.TimeScale > 0 && c.TimeScale <= 1000):
		return bad("timescale", c.TimeScale, "must be in (0, 1000]")
	case !(c.ErrorRate >= 0 && c.ErrorRate <= 1):
		return bad("error_rate", c.ErrorRate, "must be in [0, 1]")
	case c.Workers <= 0:
		return bad("origin.workers", c.Workers, "must be > 0")
	case c.Workers > maxWorkers:
		return bad("origin.workers", c.Workers, fmt.Sprintf("must be at most %d", maxWorkers))
	case c.Queue < sim.Unbounded:
		return bad("origin.queue", c.Queue, "must be >= 0, or -1 for unbounded")
	case c.Timeout < 0:
		return bad("origin.timeout", c.Timeout, "must be >= 0 (0: none)")
	}
	if err := checkDist("origin.service", c.Service); err != nil {
		return c, err
	}
	var last time.Duration
	changes := make([]sim.Change, len(c.Changes))
	for i, ch := range c.Changes {
		f := fmt.Sprintf("origin.changes[%d]", i)
		switch {
		case ch.At < last:
			return bad(f+".at", ch.At, fmt.Sprintf("changes must be in time order (after %v)", last))
		case ch.Workers < 0 || ch.Workers > maxWorkers:
			return bad(f+".workers", ch.Workers, fmt.Sprintf("must be in [0, %d] (0: unchanged)", maxWorkers))
		case ch.Workers == 0 && ch.Service.Kind == "":
			return bad(f, nil, "changes nothing: set workers or service")
		}
		if ch.Service.Kind != "" {
			if err := checkDist(f+".service", ch.Service); err != nil {
				return c, err
			}
		}
		last = ch.At
		at, ok := timescale.Scale(ch.At, c.TimeScale)
		if !ok {
			return bad(f+".at", ch.At, timescale.TooLong(c.TimeScale))
		}
		ch.At = at
		ch.Service = scaleDist(ch.Service, c.TimeScale)
		changes[i] = ch
	}
	timeout, ok := timescale.Scale(c.Timeout, c.TimeScale)
	if !ok {
		return bad("origin.timeout", c.Timeout, timescale.TooLong(c.TimeScale))
	}
	if c.Timeout > 0 {
		timeout = max(timeout, 1) // scaled below 1ns it would read as 0, none
	}
	c.Changes = changes
	c.Timeout = timeout
	c.Service = scaleDist(c.Service, c.TimeScale)
	return c, nil
}

// maxWorkers bounds the goroutines a typo could ask to hold at once.
const maxWorkers = 100_000

func checkDist(f string, d sim.Dist) error {
	bad := func(field string, v any, allowed string) error {
		return sluice.NewConfigError("origin", f+"."+field, v, allowed)
	}
	switch d.Kind {
	case sim.Constant, sim.Exponential, sim.Lognormal, sim.Bimodal:
	case "":
		return bad("kind", nil, "is required (constant, exponential, lognormal, bimodal)")
	default:
		return bad("kind", d.Kind, "unknown distribution (constant, exponential, lognormal, bimodal)")
	}
	switch {
	case d.Mean <= 0 || d.Mean > 24*time.Hour:
		return bad("mean", d.Mean, "must be in (0, 24h]")
	case d.Sigma < 0 || d.Sigma > sim.MaxSigma || math.IsNaN(d.Sigma):
		return bad("sigma", d.Sigma, fmt.Sprintf("must be in [0, %v] (0: 1)", sim.MaxSigma))
	case d.Sigma != 0 && d.Kind != sim.Lognormal:
		return bad("sigma", d.Sigma, "applies only to lognormal")
	case d.Kind == sim.Bimodal && (d.Tail <= 0 || d.Tail > 24*time.Hour):
		return bad("tail", d.Tail, "must be in (0, 24h] for bimodal")
	case d.Kind == sim.Bimodal && !(d.TailFraction >= 0 && d.TailFraction <= 1):
		return bad("tail_fraction", d.TailFraction, "must be in [0, 1]")
	case d.Kind != sim.Bimodal && d.Tail != 0:
		return bad("tail", d.Tail, "applies only to bimodal")
	case d.Kind != sim.Bimodal && d.TailFraction != 0: // NaN too
		return bad("tail_fraction", d.TailFraction, "applies only to bimodal")
	}
	return nil
}

// scaleDist scales d's service times by f. They cannot overflow: checkDist
// bounds them to 24h, and validate f to 1000.
func scaleDist(d sim.Dist, f float64) sim.Dist {
	mean, _ := timescale.Scale(d.Mean, f)
	d.Mean = max(mean, 1)
	if d.Tail != 0 {
		tail, _ := timescale.Scale(d.Tail, f)
		d.Tail = max(tail, 1)
	}
	return d
}
