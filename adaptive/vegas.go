package adaptive

import (
	"cmp"
	"math"
	"time"
)

// VegasConfig configures a Vegas limit. The zero value is a valid config:
// every zero field takes the default written next to it.
type VegasConfig struct {
	// InitialLimit is the limit before the first sample. Default 20 (or
	// MinLimit / MaxLimit if 20 falls outside them).
	InitialLimit int
	// MinLimit is the floor of the limit. Default 1.
	MinLimit int
	// MaxLimit is the ceiling of the limit. Default 1000, or MinLimit if
	// that is higher.
	MaxLimit int

	// Alpha and Beta bound the queue Vegas aims for, in multiples of
	// log10(limit) (see Vegas). Default 3 and 6; Alpha must be below Beta.
	Alpha, Beta float64
	// Smoothing weighs a new limit against the old one: 1 takes the new
	// value outright, 0.5 moves half way. Within (0, 1]; default 1.
	Smoothing float64
	// NoLoadWindow is how long the no-load latency estimate must be
	// contradicted before it is raised (see Vegas). Default 30s.
	NoLoadWindow time.Duration
	// NoSlowStart turns slow start off: the limit then grows by at most
	// beta per round trip from the start. Default false.
	NoSlowStart bool
	// Backoff multiplies the limit after a round trip with a Dropped
	// sample, taking at least one step off; within (0, 1]. Default 0.9.
	// 1 takes one step off, as Netflix's VegasLimit does.
	Backoff float64
	// Timeout, when positive, makes a Success slower than it count as
	// Dropped: the deadline a client gives up at, when the limiter is not
	// told of the give-up itself. Default 0: latency counts only as a
	// queue.
	Timeout time.Duration
}

// Vegas is TCP Vegas's delay-based limit as Netflix's VegasLimit defines it:
// it estimates how many requests are queued from how much slower they are
// than with no load, and keeps that queue small. It is kept for comparison;
// the recommended limit is Little.
//
//	queue = ceil(limit × (1 − noLoad/latency))
//
// The limit moves once per round trip (one mean latency; every sample of
// a round trip reflects the same limit), with latency the round trip's
// mean. With step = max(1, floor(log10(limit))), alpha = Alpha·step, beta =
// Beta·step and threshold = step:
//
//   - slow start: queue ≤ threshold doubles the limit if it was full; the
//     first larger queue ends it and takes the queue off the limit;
//   - queue ≤ threshold: + beta; queue < alpha: + step;
//   - queue > beta: − step; otherwise unchanged;
//   - a round trip with a Dropped sample (or a Success slower than
//     Timeout): × Backoff, at least one step off, and slow start ends (TCP
//     Vegas keeps Reno's multiplicative decrease on loss; Netflix takes
//     one step off). Drops of requests that started before that backoff
//     are answered by it and ignored;
//   - a round trip in which in flight never reached half the limit:
//     unchanged.
//
// The new value is smoothed (Smoothing) and clamped to [MinLimit,
// MaxLimit]. Above a limit of 1000 Netflix's step jumps to sqrt; here it
// stays log10.
//
// The no-load latency is the lowest mean latency of the least loaded
// requests of a round trip, pooled until the evidence holds at least 32
// requests. The least loaded are the successes that started near the fewest
// in flight of the round trip (at most an eighth more, plus one), counted
// from the success that brought the fewest down: those before it are
// dropped, even those near it. Keeping them gives more evidence per round
// trip, so more pooled pieces and a lower minimum of noisy means, a baseline
// that reads round trips as queued: in the simulations it cut goodput
// (overload-steps). It falls at once to lower evidence; it rises only
// when, for a whole NoLoadWindow, all the evidence at about the concurrency
// it was seen at, or less, was higher, and some of it came in the window's
// second half. Round trips at higher concurrency never raise it: they
// carry the queue this limit let in. No probe: it is never measured by
// pinning the limit low.
//
// When to use it: requests that cost about the same (constant or nearly
// constant service times), where a queue shows as latency above the
// no-load latency. With noisy service times (lognormal, exponential,
// bimodal) the no-load estimate is a minimum of noisy means and falls
// toward the fast tail, and the limit with it: use Little.
//
// A Vegas is not safe for concurrent use (see Algorithm).
type Vegas struct {
	limit       float64
	bounds      bounds
	alpha, beta float64
	smoothing   float64
	backoff     float64
	timeout     time.Duration
	slowStart   bool
	cut         dropCut
	rt          roundTrip
	noLoad      noLoadMin
}

// NewVegas returns a Vegas limit, or an error naming the invalid field.
func NewVegas(cfg VegasConfig) (*Vegas, error) {
	const typ = "VegasConfig"
	initial, b, err := resolveBounds(typ, cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)
	if err != nil {
		return nil, err
	}
	if cfg.Alpha < 0 || math.IsNaN(cfg.Alpha) || math.IsInf(cfg.Alpha, 0) {
		return nil, invalid(typ, "Alpha", cfg.Alpha, "> 0 (0 means the default)")
	}
	if cfg.Beta < 0 || math.IsNaN(cfg.Beta) || math.IsInf(cfg.Beta, 0) {
		return nil, invalid(typ, "Beta", cfg.Beta, "> 0 (0 means the default)")
	}
	alpha, beta := cmp.Or(cfg.Alpha, 3), cmp.Or(cfg.Beta, 6)
	switch {
	case alpha < beta:
	case cfg.Alpha == 0: // only Beta was set: it is the field at fault
		return nil, invalid(typ, "Beta", beta, "> Alpha ("+ftoa(alpha)+")")
	default:
		return nil, invalid(typ, "Alpha", alpha, "< Beta ("+ftoa(beta)+")")
	}
	if err := checkFraction(typ, "Smoothing", cfg.Smoothing); err != nil {
		return nil, err
	}
	if err := checkNonNegative(typ, "NoLoadWindow", cfg.NoLoadWindow); err != nil {
		return nil, err
	}
	if err := checkFraction(typ, "Backoff", cfg.Backoff); err != nil {
		return nil, err
	}
	if err := checkNonNegative(typ, "Timeout", cfg.Timeout); err != nil {
		return nil, err
	}
	return &Vegas{
		limit:     initial,
		bounds:    b,
		alpha:     alpha,
		beta:      beta,
		smoothing: cmp.Or(cfg.Smoothing, 1),
		backoff:   cmp.Or(cfg.Backoff, 0.9),
		timeout:   cfg.Timeout,
		slowStart: !cfg.NoSlowStart,
		noLoad:    noLoadMin{window: cmp.Or(cfg.NoLoadWindow, 30*time.Second)},
	}, nil
}

// Limit returns the current limit.
func (v *Vegas) Limit() int { return int(v.limit) }

// NoLoadLatency returns the current estimate of the latency with nothing
// queued, or 0 before the first Success.
func (v *Vegas) NoLoadLatency() time.Duration { return time.Duration(v.noLoad.est) }

// Observe feeds one sample taken at now and returns the new limit.
func (v *Vegas) Observe(now time.Time, s Sample) int {
	s = overdue(s, v.timeout)
	if v.cut.answered(now, s) {
		return int(v.limit)
	}
	if !learnable(s) || !v.rt.add(now, s) {
		return int(v.limit)
	}
	defer v.rt.next(now)
	rtt := v.rt.mean()
	if low, k, n := v.rt.low(); low > 0 {
		v.noLoad.pool(now, low, k, n)
	}
	step := log10Step(v.limit)
	var next float64
	switch {
	case v.rt.dropped:
		v.slowStart = false
		v.cut = dropCut(now)
		next = min(v.limit*v.backoff, v.limit-step)
	case rtt == 0:
		return int(v.limit) // no latency, nothing to learn
	case float64(v.rt.maxInFlight)*2 < v.limit:
		return int(v.limit) // the limit is not in use: do not drift upward
	default:
		queue := math.Ceil(v.limit * (1 - v.noLoad.est/rtt))
		switch {
		case queue <= step && v.slowStart:
			if v.rt.maxInFlight < int(v.limit) {
				return int(v.limit) // double only a limit that was full (it admits int(limit))
			}
			next = 2 * v.limit
		case queue <= step:
			next = v.limit + v.beta*step
		case v.slowStart:
			// The first queue: give back what the last doubling
			// overshot, rather than walk down one step per round trip.
			v.slowStart = false
			next = v.limit - queue
		case queue < v.alpha*step:
			next = v.limit + step
		case queue > v.beta*step:
			next = v.limit - step
		default:
			return int(v.limit)
		}
	}
	v.limit = v.bounds.smooth(v.limit, next, v.smoothing)
	return int(v.limit)
}

// noLoadMin estimates the latency with nothing queued: a minimum that
// falls at once and rises only on evidence from comparable load (see Vegas).
type noLoadMin struct {
	window time.Duration
	est    float64 // nanoseconds; 0 before the first evidence
	// seenAt is the highest in-flight count at which evidence no higher
	// than est was seen: up to it, est is known to hold.
	seenAt int
	// The comparable evidence (taken near seenAt in flight or below) of
	// the current window: the sum and count of its latencies, and when the
	// latest came.
	candSum   float64
	candN     int
	candStart time.Time
	candLast  time.Time
	// Least-loaded requests pooled until they are minEvidence (see pool).
	poolSum float64
	poolN   int
	poolAt  int
}

// minEvidence is the fewest requests one piece of no-load evidence
// averages: round trips with fewer least-loaded requests are pooled until
// they have as many. The estimate falls at once to lower evidence, so it
// is a minimum over many pieces; the mean of one or two requests of a
// noisy service is often far below its mean at no load (the 1st
// percentile of seed 000's latency is a third of its mean), and a
// baseline that low reads every round trip as queued.
const minEvidence = 32

// pool gathers the least-loaded requests of round trips into evidence of
// at least minEvidence requests, then observes it.
func (m *noLoadMin) pool(now time.Time, r float64, k, n int) {
	// Round trips at any load are pooled, and the pool counts as taken at
	// the highest in flight among them (a claim no stronger than its
	// weakest part). Starting over when the load moved far lets no pool
	// fill while the load wanders after a slowdown: Vegas then stayed at
	// 11 for a service of 100 (TestPropertyRelearnsAfterSlowdown).
	if m.poolN == 0 {
		m.poolAt = n
	}
	m.poolSum += r * float64(k)
	m.poolN += k
	m.poolAt = max(m.poolAt, n)
	// The first evidence is taken whole, however thin: a baseline is
	// needed now. If it is an outlier, the window rule (see observe)
	// replaces it with the mean of what follows.
	if m.est == 0 || m.poolN >= minEvidence {
		m.observe(now, m.poolSum/float64(m.poolN), m.poolN, m.poolAt)
		m.poolSum, m.poolN = 0, 0
	}
}

// observe takes the mean latency r (ns) of the k least loaded requests of
// one or more round trips, which started with n in flight at most.
func (m *noLoadMin) observe(now time.Time, r float64, k, n int) {
	if m.est == 0 || r < m.est {
		m.est, m.seenAt = r, max(m.seenAt, n)
		m.candSum, m.candN, m.candStart = 0, 0, now
		return
	}
	if r == m.est {
		m.seenAt = max(m.seenAt, n)
	}
	if near(n, m.seenAt) {
		m.candSum += r * float64(k)
		m.candN += k
		m.candLast = now
	}
	if now.Sub(m.candStart) >= m.window {
		// Slower at comparable load for a whole window, and still so in
		// its second half (one slow round trip at the start of a window
		// spent above seenAt is not a slowdown). The new estimate is the
		// mean of that evidence, not its minimum: the minimum of many
		// small noisy means is an outlier, and a baseline that low reads
		// every round trip as queued.
		if m.candN > 0 && now.Sub(m.candLast) < m.window/2 {
			m.est = m.candSum / float64(m.candN)
		}
		m.candSum, m.candN, m.candStart = 0, 0, now
	}
}
