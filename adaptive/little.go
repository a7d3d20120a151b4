package adaptive

import (
	"cmp"
	"fmt"
	"os"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// LittleConfig configures a Little limit. The zero value is a valid config:
// every zero field takes the default written next to it.
type LittleConfig struct {
	// InitialLimit is the limit before the first sample. Default 20 (or
	// MinLimit / MaxLimit if 20 falls outside them).
	InitialLimit int
	// MinLimit is the floor of the limit. Default 1.
	MinLimit int
	// MaxLimit is the ceiling of the limit. Default 1000, or MinLimit if
	// that is higher.
	MaxLimit int

	// Headroom is the queueing delay the limit aims for, as a share of the
	// no-load latency: the limit settles where latency is (1 + Headroom) ×
	// the no-load latency, which by Little's law is (1 + Headroom) × the
	// service's concurrency. Within (0, 1]; default 0.15.
	Headroom float64
	// Backoff multiplies the limit after a window with a Dropped sample.
	// Within (0, 1]; default 0.9.
	Backoff float64
	// Timeout, when positive, makes a Success slower than it count as
	// Dropped: the deadline a client gives up at, when the limiter is not
	// told of the give-up itself. Default 0.
	Timeout time.Duration
}

// Little holds in flight the service's own concurrency plus a small queue,
// found by Little's law (in flight = throughput × latency). It is sluice's
// recommended adaptive limit: use it unless you know better.
//
// It keeps an estimate noLoad of the latency with nothing queued and,
// once per window (at least a mean latency long and at least 32 samples),
// compares the window's mean latency with it:
//
//	q     = latency/noLoad − 1                 (queueing delay, as a share)
//	limit = limit × (1 + Headroom) / (1 + q)   (moving half way there)
//
// While the limit is the constraint, throughput × noLoad is the number of
// requests the service runs at once (Little's law), and limit / (1 + q) is
// exactly that: so a cut lands on the service's concurrency plus Headroom
// in one step, and with no queue (q = 0) the limit grows by Headroom per
// window. The limit settles where the queueing delay is Headroom × noLoad.
// It grows only while in flight reached it (an unused limit does not
// drift upward); a window with a Dropped sample multiplies it by Backoff
// once (drops of requests admitted before that cut are answered by it).
//
// The no-load latency is learned from live traffic, never by pinning the
// limit low to measure it (which sheds healthy requests: Envoy,
// envoyproxy/envoy#8337), and never from the queue the limit itself lets
// in (Netflix/concurrency-limits #165):
//
//   - it is first the first window's mean, at the in flight it ran at;
//   - knownAt is the in flight at which latency is known to be noLoad
//     (no queue); it rises to a window's mean in flight when that window
//     was within half the Headroom of noLoad, never above limit / (1 +
//     Headroom);
//   - successes that started at knownAt in flight or fewer are pooled
//     into evidence of at least 32: if its mean is beyond (1 + Headroom) ×
//     noLoad, the service itself slowed (at a load that did not queue
//     before, it takes longer) and noLoad becomes that mean; otherwise
//     noLoad moves a quarter of the way to it. A cut for a slower service
//     takes the limit below knownAt, which is how that evidence comes;
//   - all successes are pooled into evidence of at least 128: a mean
//     below (1 − 2 × Headroom) × noLoad (beyond the noise of 128 samples)
//     says the service got faster, queue or no queue, and noLoad falls to
//     it at once.
//
// Use it for a service whose capacity is a number of workers, threads or
// connections (most are), with a queue in front (concurrency.AdaptiveLIFO)
// so a request is ready when a worker frees: the limit sets how many run,
// the queue keeps them busy and sheds what waits too long. It needs
// latency to rise with queueing; when only failures can be trusted (at a
// client of a shared service), use AIMD. Figures from the simulator, with
// the commands that make them, are in docs/simulations.md.
//
// A Little is not safe for concurrent use (see Algorithm).
type Little struct {
	limit    float64
	bounds   bounds
	headroom float64
	backoff  float64
	timeout  time.Duration
	cut      dropCut

	noLoad  float64 // ns; 0 before the first window
	knownAt float64 // in flight at which latency is known to be noLoad

	win   littleWindow
	known stat // successes at <= knownAt/2 in flight, pooled
	above stat // successes just above knownAt, pooled
	// faster counts consecutive windows faster than noLoad allows (n),
	// their latencies' sum and count (in sumSq).
	faster stat
}

// littleWindow gathers one window's samples.
type littleWindow struct {
	start       time.Time // zero before the first sample
	length      time.Duration
	lat         stat    // the successes' latencies, ns
	inFlight    float64 // sum of their InFlight
	maxInFlight int
	drops       float64
}

// overloaded reports whether more than a few of the window's samples
// were Dropped (see littleDropShare).
func (w *littleWindow) overloaded() bool {
	return w.drops > max(1, littleDropShare*(w.lat.n+w.drops))
}

// stat is a count of latencies (ns), their sum and their sum of squares.
type stat struct{ n, sum, sumSq float64 }

func (s *stat) add(x float64) { s.n++; s.sum += x; s.sumSq += x * x }
func (s stat) mean() float64  { return s.sum / s.n }

// se returns the standard error of the mean.
func (s stat) se() float64 {
	m := s.mean()
	return math.Sqrt(max(s.sumSq/s.n-m*m, 0) / s.n)
}

// firm reports whether the mean is known well enough to act on: from at
// least lo samples, a standard error within 5% of the mean or hi samples
// (a constant service needs few, a heavy-tailed one many).
func (s stat) firm(lo, hi float64) bool {
	return s.n >= hi || s.n >= lo && s.se() <= 0.05*s.mean()
}

// Sample counts: a window needs at least littleWindowMin successes and
// at most littleWindowMax (or 16 round trips, for a service with few
// requests); no-load evidence at least littleEvidence and at most
// 4 × littleWindowMax.
const (
	littleWindowMin = 32
	littleWindowMax = 512
	littleEvidence  = 64
	// littleDropShare is the share of a window's samples that must be
	// Dropped for the limit to back off: a service's own tail times out
	// a request now and then, and backing off for each would hold the
	// limit below capacity.
	littleDropShare = 0.1
)

// NewLittle returns a Little limit, or an error naming the invalid field.
func NewLittle(cfg LittleConfig) (*Little, error) {
	const typ = "LittleConfig"
	initial, b, err := resolveBounds(typ, cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)
	if err != nil {
		return nil, err
	}
	if err := checkFraction(typ, "Headroom", cfg.Headroom); err != nil {
		return nil, err
	}
	if err := checkFraction(typ, "Backoff", cfg.Backoff); err != nil {
		return nil, err
	}
	if err := checkNonNegative(typ, "Timeout", cfg.Timeout); err != nil {
		return nil, err
	}
	return &Little{
		limit:    initial,
		bounds:   b,
		headroom: cmp.Or(cfg.Headroom, 0.25),
		backoff:  cmp.Or(cfg.Backoff, 0.9),
		timeout:  cfg.Timeout,
	}, nil
}

// Limit returns the current limit.
func (l *Little) Limit() int { return int(l.limit) }

// NoLoadLatency returns the estimate of the latency with nothing queued,
// or 0 before the first window closed.
func (l *Little) NoLoadLatency() time.Duration { return time.Duration(l.noLoad) }

// Observe feeds one sample taken at now and returns the new limit.
func (l *Little) Observe(now time.Time, s Sample) int {
	s = overdue(s, l.timeout)
	if !learnable(s) || l.cut.answered(now, s) {
		return int(l.limit)
	}
	w := &l.win
	if w.start.IsZero() {
		w.start, w.length = now, s.Latency
	}
	switch {
	case s.Outcome == sluice.Dropped:
		w.drops++
	case s.Latency > 0:
		r, c := float64(s.Latency), float64(s.InFlight)
		w.lat.add(r)
		w.inFlight += c
		switch {
		case c <= l.knownAt/2:
			l.known.add(r)
		case c > l.knownAt && c <= l.knownAt+1+l.knownAt/8:
			l.above.add(r)
		}
	}
	w.maxInFlight = max(w.maxInFlight, s.InFlight)
	elapsed := now.Sub(w.start)
	if elapsed < w.length || !w.overloaded() && !w.lat.firm(littleWindowMin, littleWindowMax) &&
		!(elapsed >= 16*w.length && w.lat.n >= littleWindowMin) {
		return int(l.limit)
	}
	if l.noLoad == 0 && !w.overloaded() && (w.lat.n < littleEvidence || elapsed < 4*time.Duration(w.lat.mean())) {
		// The first estimate judges everything after it: not from too
		// few, and not too early (the first requests to finish are the
		// fast ones).
		return int(l.limit)
	}
	l.close(now)
	length := w.length
	if w.lat.n > 0 {
		length = time.Duration(w.lat.mean())
	}
	*w = littleWindow{start: now, length: length}
	return int(l.limit)
}

// close acts on the window that just closed.
func (l *Little) close(now time.Time) {
	w := &l.win
	if w.overloaded() {
		l.cut = dropCut(now)
		l.limit = l.bounds.clamp(l.limit * l.backoff)
		return
	}
	if w.lat.n == 0 {
		return
	}
	latency := w.lat.mean()
	if l.noLoad == 0 {
		l.noLoad = latency
		l.knownAt = min(w.inFlight/w.lat.n, l.limit/(1+l.headroom))
		l.known, l.above = stat{}, stat{}
		return
	}
	l.learn(w.lat)
	q := latency/l.noLoad - 1
	if debugLittle && now.Sub(debugLast) > time.Second {
		debugLast = now
		fmt.Printf("t=%v lim=%.1f lat=%.1fms if=%.1f max=%d noLoad=%.1fms knownAt=%.1f q=%.2f n=%.0f\n", 0, l.limit, latency/1e6, w.inFlight/w.lat.n, w.maxInFlight, l.noLoad/1e6, l.knownAt, q, w.lat.n)
	}
	if float64(w.maxInFlight) < l.limit-1 {
		return // the limit is not in use: the latency says nothing about it
	}
	if w.inFlight/w.lat.n <= l.knownAt/2 {
		// Too few in flight to queue: what is above noLoad is noise, or a
		// slower service the known evidence is about to tell.
		q = min(q, 0)
	}
	l.limit = l.bounds.clamp(l.limit * min(max((1+l.headroom)/(1+q), 0.5), 1+2*l.headroom))
}

// learn updates noLoad and knownAt from the closed window's latencies and
// the pooled evidence (see the type's doc). Each rule needs its evidence
// beyond two standard errors, so noise does not move the baseline.
func (l *Little) learn(win stat) {
	if win.mean()+2*win.se() < l.noLoad*(1-l.headroom) {
		// Faster, queue included: the service sped up, if the next
		// window says so too (one can hold only the fast requests of a
		// service whose slow ones are still running).
		l.faster.n++
		l.faster.sum += win.sum
		l.faster.sumSq += win.n
		if l.faster.n >= 2 {
			l.noLoad = l.faster.sum / l.faster.sumSq
			l.known, l.above, l.faster = stat{}, stat{}, stat{}
		}
		return
	}
	l.faster = stat{}
	if l.known.firm(littleEvidence, littleWindowMax) {
		m := l.known.mean()
		if m-2*l.known.se() > l.noLoad*(1+l.headroom) {
			l.noLoad = m // slower where nothing queued: the service slowed
		} else {
			l.noLoad += (m - l.noLoad) / 2
		}
		l.known = stat{}
	}
	if l.above.firm(2*littleEvidence, 4*littleWindowMax) {
		if l.above.mean()+2*l.above.se() <= l.noLoad*(1+l.headroom/2) {
			l.knownAt = min(l.knownAt+1+l.knownAt/8, l.limit/(1+l.headroom))
		}
		l.above = stat{}
	}
}

var debugLittle = os.Getenv("DEBUG_LITTLE") != ""
var debugLast time.Time
