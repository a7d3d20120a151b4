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
// than with no load, and keeps that queue small.
//
//	queue = ceil(limit × (1 − noLoad/latency))
//
// The limit moves once per round trip (see below), with latency the mean
// over that round trip. With step = max(1, floor(log10(limit))) (1 below a
// limit of 100, 2 below 1000, …), alpha = Alpha·step, beta = Beta·step and
// threshold = step:
//
//   - slow start: queue ≤ threshold doubles the limit if it was full;
//     the first larger queue ends slow start and takes the queue off the
//     limit (limit − queue, what it would be without the overshoot of
//     the last doubling);
//   - queue ≤ threshold: + beta (nothing queues: grow fast);
//   - queue < alpha: + step;
//   - queue > beta: − step;
//   - otherwise: unchanged (the sweet spot);
//   - a round trip with a Dropped sample (or a Success slower than
//     Timeout): × Backoff, at least one step off, and slow start ends. A
//     drop says more than a queue does: a deadline was missed. Netflix
//     takes one step off, which from a limit of 20 needs 13 round trips
//     to reach a service that now holds 7 (seed 003: 26 s during which
//     every request times out); TCP Vegas keeps Reno's multiplicative
//     decrease on loss;
//     a drop of a request that started before the last backoff is
//     already answered by it and ignored (a client's timeout can be
//     longer than a round trip, so its drops land in the round trips
//     after the backoff and would cut again and again);
//   - a round trip in which in flight never reached half the limit:
//     unchanged. The limit is not the constraint, so the latency says
//     nothing about it, and growing it would only let the next burst in.
//
// The new value is smoothed (Smoothing) and clamped to [MinLimit,
// MaxLimit]. Slow start answers Netflix/concurrency-limits#35: without it a
// limit that starts at 20 takes minutes to reach a highly concurrent
// service's capacity.
//
// Round trips. A round trip closes at the first sample that arrives one
// mean latency after it opened. Netflix's Vegas moves on every sample;
// since every sample of a round trip reflects the same limit, that moves it
// about limit times before the first consequence is seen, and the limit
// swings from far above capacity to MinLimit. One move per round trip is
// what TCP Vegas does, and Netflix users get it by wrapping the limit in a
// WindowedLimit.
//
// Above a limit of 1000 Netflix's step jumps from log10 (3) to sqrt (31);
// here it stays log10, so the step grows smoothly.
//
// The no-load latency. The evidence is the mean latency of the least
// loaded requests of a round trip (those that started with about the
// fewest in flight), pooled over round trips at comparable load until it
// averages at least 32 requests. A mean, because the fastest single
// request of a noisy service is an outlier, and a baseline that low reads
// every round trip as queued; of 32, because the estimate is a minimum
// over many pieces of evidence, and the minimum of many means of two or
// three requests is an outlier too (seed 000's service, lognormal with
// σ = 0.5: the estimate fell to a third of the mean and held the limit at
// 6 of 10 workers, 55% of capacity; pooled, 91%). The least loaded,
// because they queued least. The estimate is the lowest such evidence
// (the first is taken whole, however thin), with two guards against the drift
// of Netflix's estimate (#165), and without Envoy's probe, which pins
// concurrency to a handful of requests to measure it and sheds healthy
// traffic meanwhile (envoyproxy/envoy#8337):
//
//   - it falls at once to any lower evidence;
//   - it rises only when, for a whole NoLoadWindow, all the evidence taken
//     at about the concurrency the estimate was seen at, or less, was
//     higher, and
//     some of it came in the window's second half: the service itself got
//     slower, and still is. It then becomes the mean of that evidence. Round trips at higher concurrency do not
//     count: they are slow because of the queue this limit let build, and
//     learning from them is how a baseline drifts upward until nothing is
//     shed.
//
// If the service slows down while saturated, Vegas first reads the
// slowdown as a queue and lowers the limit; once requests run at the
// concurrency the estimate was seen at, a window later the estimate is
// re-learned and the limit grows back. The cost is a lower limit for about
// one NoLoadWindow after a slowdown; the gain is a baseline that does not
// creep up under sustained load.
//
// Where it fits. Vegas suits a service whose requests cost about the same.
// It holds a small queue (3 to 6 requests below a limit of 100), which is a
// lot for a small, slow service: seed 003's 7 workers at 2 s leave 0.5 s of
// slack, 1.75 requests; Vegas gets 98% of capacity with constant arrivals
// (the client's timeouts come back as drops) but 57–70% with Poisson
// arrivals. A workload whose light-load requests are cheaper than the rest
// (health checks at night, Netflix PR #125) drags the baseline low, and the
// limit with it. With exponential service times (§15's sweep, 16 workers
// at 10 ms) it holds 49% of capacity: the first, thin evidence sets a
// baseline far below the mean, and nothing corrects it within the
// NoLoadWindow. Use Gradient2 or AIMD there.
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
	if alpha >= beta {
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
			if float64(v.rt.maxInFlight) < v.limit {
				return int(v.limit) // double only a limit that was full
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
	v.limit = v.bounds.clamp((1-v.smoothing)*v.limit + v.smoothing*v.bounds.clamp(next))
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
	if m.poolN > 0 && !near(n, m.poolAt) && !near(m.poolAt, n) {
		m.poolSum, m.poolN = 0, 0 // another load: start over
	}
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
