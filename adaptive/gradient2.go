package adaptive

import (
	"cmp"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// Gradient2Config configures a Gradient2 limit. The zero value is a valid
// config: every zero field takes the default written next to it.
type Gradient2Config struct {
	// InitialLimit is the limit before the first sample. Default 20 (or
	// MinLimit / MaxLimit if 20 falls outside them).
	InitialLimit int
	// MinLimit is the floor of the limit. Default 1 (Netflix: 20).
	MinLimit int
	// MaxLimit is the ceiling of the limit. Default 1000, or MinLimit if
	// that is higher (Netflix: 200).
	MaxLimit int

	// Tolerance is how much slower than the long-term latency the recent
	// latency may be before the limit shrinks. At least 1; default 1.5.
	Tolerance float64
	// QueueSize is the growth per update, before smoothing, while the
	// recent latency is within Tolerance. Default 4.
	QueueSize int
	// Smoothing weighs a new limit against the old one. Within (0, 1];
	// default 0.2.
	Smoothing float64
	// LongWindow is the number of samples the long-term latency averages
	// over. Default 600.
	LongWindow int
	// Timeout, when positive, makes a Success slower than it count as
	// Dropped (see Vegas). Default 0.
	Timeout time.Duration
}

// Gradient2 is Netflix's Gradient2Limit: it compares the recent latency with
// a long-term average and shrinks the limit in proportion when the recent
// one is higher than Tolerance allows. Once per round trip:
//
//	short    = mean latency of the round trip
//	long     = moving average of latency over about LongWindow samples
//	gradient = clamp(Tolerance × long / short, 0.5, 1)
//	next     = gradient × limit + QueueSize   (QueueSize only if gradient = 1)
//	limit    = clamp((1 − Smoothing) × limit + Smoothing × next)
//
// A round trip with a Dropped sample (or a Success slower than Timeout)
// has a gradient of 0.5 (Netflix's version ignores drops, and reads a
// stable timeout's flat latency as healthy, #137); a round trip in which
// in flight never reached half the limit leaves it alone.
//
// long must not learn the queue the limit lets in, or the limit grows
// without bound under modest overload (Netflix PR #134):
//
//   - long learns only from samples that started with at most seenAt in
//     flight, the concurrency at which it is known to hold. seenAt starts
//     as the highest in flight of long's first samples and rises to the
//     mean in flight of a round trip whose mean latency is within long,
//     never above limit / Tolerance (Little's law: saturated, the limit
//     settles where latency is Tolerance × long);
//   - the QueueSize term is added only when the gradient is 1;
//   - the service slowed: when the successes at most seenAt in flight are
//     beyond Tolerance × long in consecutive round trips, over at least
//     32 of them, long takes their mean at once;
//   - latency fell back: when long > 2 × short, long decays by 5% per
//     round trip.
//
// It averages rather than taking a minimum, so it suits requests whose
// cost varies widely: a minimum is the cheapest request's latency. It
// trades up to Tolerance of queueing for never running the service below
// capacity: under sustained overload it holds more than the service's
// concurrency in flight, and what it admits waits. Little holds less.
//
// A Gradient2 is not safe for concurrent use (see Algorithm).
type Gradient2 struct {
	limit     float64
	bounds    bounds
	tolerance float64
	queue     float64
	smoothing float64

	timeout time.Duration

	long   ewma
	rt     roundTrip
	seenAt int // in flight at which long is known to hold (see the type's doc)

	rtInFlight float64  // sum of InFlight over the round trip's successes
	known      evidence // the round trip's successes that started at <= seenAt
	slow       evidence // known evidence beyond tolerance, pooled over round trips
}

// evidence is a count of latencies and their sum (ns).
type evidence struct {
	n   int
	sum float64
}

func (e *evidence) add(n int, sum float64) { e.n += n; e.sum += sum }
func (e evidence) mean() float64           { return e.sum / float64(e.n) }

// slowEvidence is how many successes at known load must be beyond tolerance,
// in consecutive round trips, before long takes their mean: enough that
// their mean is not the tail of a noisy service: with exponential service
// times (a coefficient of variation of 1) the mean of 32 passes 1.5 × the
// true mean about once in 170, and a single round trip of a dozen often.
const slowEvidence = 32

// NewGradient2 returns a Gradient2 limit, or an error naming the invalid
// field.
func NewGradient2(cfg Gradient2Config) (*Gradient2, error) {
	const typ = "Gradient2Config"
	initial, b, err := resolveBounds(typ, cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)
	if err != nil {
		return nil, err
	}
	if cfg.Tolerance != 0 && !(cfg.Tolerance >= 1) || math.IsInf(cfg.Tolerance, 0) {
		return nil, invalid(typ, "Tolerance", cfg.Tolerance, ">= 1 (0 means the default)")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"QueueSize", cfg.QueueSize}, {"LongWindow", cfg.LongWindow}} {
		if f.v < 0 {
			return nil, invalid(typ, f.name, f.v, ">= 0 (0 means the default)")
		}
	}
	if err := checkFraction(typ, "Smoothing", cfg.Smoothing); err != nil {
		return nil, err
	}
	if err := checkNonNegative(typ, "Timeout", cfg.Timeout); err != nil {
		return nil, err
	}
	return &Gradient2{
		limit:     initial,
		bounds:    b,
		tolerance: cmp.Or(cfg.Tolerance, 1.5),
		queue:     float64(cmp.Or(cfg.QueueSize, 4)),
		smoothing: cmp.Or(cfg.Smoothing, 0.2),
		long:      ewma{n: cmp.Or(cfg.LongWindow, 600)},
		timeout:   cfg.Timeout,
	}, nil
}

// next opens the following round trip.
func (g *Gradient2) next(now time.Time) {
	g.rt.next(now)
	g.rtInFlight, g.known = 0, evidence{}
}

// Limit returns the current limit.
func (g *Gradient2) Limit() int { return int(g.limit) }

// LongLatency returns the long-term latency average the recent latency is
// compared with, or 0 before the first Success.
func (g *Gradient2) LongLatency() time.Duration { return time.Duration(g.long.value) }

// Observe feeds one sample taken at now and returns the new limit.
func (g *Gradient2) Observe(now time.Time, s Sample) int {
	s = overdue(s, g.timeout)
	if !learnable(s) {
		return int(g.limit)
	}
	if s.Outcome != sluice.Dropped && s.Latency > 0 {
		// long learns from samples at concurrency where it is known to
		// hold (see the type's doc).
		r := float64(s.Latency)
		g.rtInFlight += float64(s.InFlight)
		switch {
		case !g.long.warm():
			g.long.add(r) // warming up: all there is
			g.seenAt = max(g.seenAt, s.InFlight)
		case s.InFlight <= g.seenAt:
			g.known.add(1, r)
			g.long.add(r)
		}
	}
	if !g.rt.add(now, s) {
		return int(g.limit)
	}
	defer g.next(now)
	short := g.rt.mean()
	if short > 0 && short <= g.long.value {
		// long holds at this round trip's typical load (its mean in
		// flight: the maximum is a burst that lasted an instant), but
		// not above limit / Tolerance (Little's law, see the type's doc).
		g.seenAt = max(g.seenAt, int(min(g.rtInFlight/float64(g.rt.n), g.limit/g.tolerance)))
	}
	switch {
	case g.known.n > 0 && g.known.mean() <= g.tolerance*g.long.value:
		g.slow = evidence{} // known load, known latency: nothing changed
	case g.known.n > 0:
		g.slow.add(g.known.n, g.known.sum)
	}
	switch {
	case g.slow.n >= slowEvidence:
		// Beyond tolerance at a load long held at, consistently: the
		// service itself slowed, this limit queued nothing. Take the new
		// latency as the baseline now rather than over LongWindow
		// samples, which at a few requests per second is minutes of
		// shedding.
		g.long.value = g.slow.mean()
		g.slow = evidence{}
	case short > 0 && g.long.value > 2*short:
		g.long.value *= 0.95 // latency fell back: let go of the overload
	}
	var next float64
	switch {
	case g.rt.dropped:
		next = 0.5 * g.limit
	case short == 0:
		return int(g.limit) // no latency, nothing to learn
	case float64(g.rt.maxInFlight)*2 < g.limit:
		return int(g.limit) // the limit is not in use
	default:
		gradient := min(max(g.tolerance*g.long.value/short, 0.5), 1)
		next = gradient * g.limit
		if gradient == 1 {
			next += g.queue
		}
	}
	g.limit = g.bounds.smooth(g.limit, next, g.smoothing)
	return int(g.limit)
}
