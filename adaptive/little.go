package adaptive

import (
	"cmp"
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
	// service's concurrency. Within (0, 1]; default 0.25.
	Headroom float64
	// Backoff multiplies the limit after a window in which more than a
	// tenth of the samples were Dropped. Within (0, 1]; default 0.9.
	Backoff float64
	// Timeout, when positive, makes a Success slower than it count as
	// Dropped: the deadline a client gives up at, when the limiter is not
	// told of the give-up itself. Default 0.
	Timeout time.Duration
}

// Little holds in flight what the service runs at once, plus a small
// queue: by Little's law, in flight = throughput × latency, so while the
// limit is what holds requests back, throughput × noLoad (the latency with
// nothing queued) is the service's own concurrency, and anything admitted
// beyond it only waits. It is sluice's recommended adaptive limit: use it,
// behind a short LIFO queue whose MaxWait is a few service times
// (concurrency.Config{Discipline: LIFO, MaxQueue, MaxWait}), unless you
// know better.
//
// Once per window (at least one mean latency, and enough successes that
// their mean is known within about 5%) it compares the window's mean
// latency with noLoad:
//
//	q     = latency/noLoad − 1                        queueing delay, as a share
//	limit = limit × clamp((1 + Headroom)/(1 + q), 0.5, 1 + Headroom)
//
// With a queue (q > Headroom) the cut lands in one step on the service's
// concurrency × (1 + Headroom); with none the limit grows by Headroom per
// window, so it follows a service that gained workers within a few
// windows. It settles where the queueing delay is Headroom × noLoad. An unused limit (in flight never reached it) does not move; a
// window in which more than a tenth of the samples were Dropped multiplies
// it by Backoff (a drop now and then is the service's own tail, and
// backing off for each would hold the limit below capacity).
//
// noLoad is learned from live traffic: never by pinning the limit low to
// measure it, which sheds healthy requests (envoyproxy/envoy#8337), and
// never from the queue the limit lets in, which makes a baseline creep up
// until nothing is shed (Netflix/concurrency-limits #165):
//
//   - the first estimate is the mean of a window of at least 256
//     successes with a standard error within 5% (or 512), that lasted four
//     mean latencies. If the limit held the traffic back during it, it may
//     carry a queue the initial limit let in: the limit halves, and goes
//     on halving while the latency falls with it;
//   - knownAt is a concurrency at which latency is known to be noLoad; it
//     starts at the first window's, and rises by an eighth when firm
//     evidence from just above it is within Headroom/2 of noLoad, never
//     past limit / (1 + Headroom);
//   - successes that started with at most knownAt/2 in flight cannot have
//     queued (unless half the workers went): their pooled mean moves noLoad
//     half way to it, or all the way when it is beyond (1 + Headroom) ×
//     noLoad by two standard errors: the service itself slowed. A slower
//     service reads as a queue at first, and the cuts that follow are
//     what bring those successes;
//   - two windows in a row faster than (1 − Headroom) × noLoad by two
//     standard errors, queue included, say the service sped up, and
//     noLoad falls to them.
//
// Use it for a service whose capacity is a number of workers, threads or
// connections whose latency rises when they are all busy. Where only
// failures can be trusted (a client in front of a shared service), use
// AIMD. Measured figures, with the command that makes them, are in
// docs/simulations.md.
//
// A Little is not safe for concurrent use (see Algorithm).
type Little struct {
	limit    float64
	bounds   bounds
	headroom float64
	backoff  float64
	timeout  time.Duration
	cut      dropCut

	noLoad  float64 // ns; 0 until the first estimate
	knownAt float64 // in flight at which latency is known to be noLoad
	last    float64 // the last window's mean latency, ns

	// probeFrom is the limit before the last halving of a start-up probe
	// (see probe), 0 when not probing; skip passes over the window that
	// still holds requests admitted before the halving.
	probeFrom float64
	skip      bool

	win       littleWindow
	known     stat      // successes at <= knownAt/2 in flight, pooled
	knownFrom time.Time // when known started pooling
	above     stat      // successes just above knownAt, pooled
	faster    int       // windows in a row faster than noLoad allows
	fastSum   stat      // their latencies
}

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
// or 0 before the first estimate.
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
			w.known.add(r)
		case c > l.knownAt && c <= l.knownAt+1+l.knownAt/8:
			l.above.add(r)
		}
	}
	w.maxInFlight = max(w.maxInFlight, s.InFlight)
	if !w.done(now) {
		return int(l.limit)
	}
	if l.noLoad == 0 && !w.overloaded() &&
		(!w.lat.firm(4*littleEvidence, littleWindowMax) || now.Sub(w.start) < 4*time.Duration(w.lat.mean())) {
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
	latency, inFlight := w.lat.mean(), w.inFlight/w.lat.n
	if l.noLoad == 0 {
		l.noLoad, l.last = latency, latency
		l.knownAt = min(inFlight, l.limit/(1+l.headroom))
		if inFlight >= 0.9*l.limit {
			l.probe(latency) // saturated from the start
		}
		return
	}
	if l.probeFrom > 0 {
		switch {
		case l.skip:
			l.skip = false // requests admitted before the halving
		case latency < l.last*l.limit/l.probeFrom*(1+l.headroom):
			l.probe(latency) // it fell with the limit: still a queue
		default:
			l.noLoad, l.last, l.probeFrom = min(l.noLoad, latency), latency, 0
		}
		return
	}
	l.learn(now, w.lat, w.known)
	if float64(w.maxInFlight) < l.limit-1 {
		return // the limit is not in use: the latency says nothing about it
	}
	q := latency/l.noLoad - 1
	if inFlight <= l.knownAt/2 {
		// Too few in flight to queue: what is above noLoad is noise, or a
		// slower service the known evidence is about to tell.
		q = min(q, 0)
	}
	l.limit = l.bounds.clamp(l.limit * min(max((1+l.headroom)/(1+q), 0.5), 1+l.headroom))
}

// probe halves the limit: the first windows were saturated, and their
// latency may carry a queue the initial limit let in. While the latency
// falls with the limit it was a queue, and the halving goes on; once it
// does not, it is the no-load latency.
func (l *Little) probe(latency float64) {
	l.noLoad, l.last = latency, latency
	l.probeFrom, l.skip = l.limit, true
	l.limit = l.bounds.clamp(l.limit / 2)
	l.knownAt = min(l.knownAt, l.limit)
}

// learn updates noLoad and knownAt from the closed window's latencies (win,
// and known: those that started at knownAt/2 in flight or fewer) and the
// pooled evidence (see the type's doc).
func (l *Little) learn(now time.Time, win, known stat) {
	if win.mean()-2*win.se() > l.last*(1+2*l.headroom) {
		l.known = stat{} // a jump: what was pooled is of another service
	}
	l.last = win.mean()
	if win.mean()+2*win.se() < l.noLoad*(1-l.headroom) {
		// Faster, queue included: the service sped up, if the next
		// window says so too (one window can hold only the fast requests
		// of a service whose slow ones are still running).
		l.faster++
		l.fastSum.merge(win)
		if l.faster >= 2 {
			l.noLoad = l.fastSum.mean()
			l.known, l.above = stat{}, stat{}
			l.faster, l.fastSum = 0, stat{}
		}
		return
	}
	l.faster, l.fastSum = 0, stat{}
	if l.known.n == 0 {
		l.knownFrom = now
	}
	l.known.merge(known)
	long := now.Sub(l.knownFrom) >= 16*time.Duration(l.noLoad)
	if l.known.firm(littleEvidence, littleWindowMax) || long && l.known.n >= littleFew {
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
