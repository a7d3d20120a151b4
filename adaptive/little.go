package adaptive

import (
	"cmp"
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
	// Backoff multiplies the limit after a window in which more than a
	// tenth of the samples were Dropped (twice the share that succeeded
	// does, when less, down to a half). Within (0, 1]; default 0.9.
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
// behind a short LIFO queue whose wait is bounded to a few service times
// (concurrency.Config{Discipline: LIFO, MaxQueue: 50, MaxWaitServices: 4}),
// unless you know better. The queue keeps a request ready for each worker
// that frees, so a limit near the workers costs no throughput; LIFO serves
// the freshest, and once the queue stands (overload) the bound tells the
// oldest no in a few service times instead of at their own deadline,
// while a burst the limit can drain is served. The bound's price: after a
// change that gives the service room, what arrives above the old limit for
// longer than the bound, before the limit sees the change (a few tenths of
// a second), is told no. A queue of 100 without the bound holds it until
// the limit grows, and answers the excess at its deadline instead
// (docs/simulations.md).
//
// Once per window (at least one mean latency, and enough successes that
// their mean is known within about 5%; for a service whose latencies are
// all within 5% of each other, two mean latencies and 8 successes) it
// compares the window's mean latency with noLoad:
//
//	q     = latency/noLoad − 1                        queueing delay, as a share
//	limit = limit × clamp((1 + Headroom)/(1 + q), 0.5, 1 + Headroom)
//
// With a queue (q > Headroom) the cut lands in one step on the service's
// concurrency × (1 + Headroom); with none the limit grows by Headroom per
// window, so it follows a service that gained workers within a few
// windows. It settles where the queueing delay is Headroom × noLoad: with
// the default 0.15, 1.15 × the service's concurrency in flight. A window's
// mean is noisy (about 5% for 200 requests of a lognormal service), as
// large as the step from N to N+1 in flight, so a move smaller than three
// standard errors of that mean is damped to a quarter (the factor to the
// power 0.25), unless the latency is below noLoad by Headroom/2 (no queue:
// a limit below the concurrency costs throughput, one above it only
// latency): the limit then averages about four windows instead of
// following each one's noise below the service's concurrency.
//
// The damping slows growth too, and a limit that cut for a service that
// lost workers must grow back when they return. The latency cannot tell:
// at the service's concurrency and below it, it is noLoad, within a
// window's noise. The limiter's queue can (Sample.Waiting): when nine in
// ten of a window's successes left requests waiting for a permit, the in
// flight is below knownAt (a concurrency that ran at noLoad) and the
// latency is below (1 + Headroom/2) × noLoad by a standard error, the
// limit, not the service, held them back, and it grows undamped, by
// (1 + Headroom)^k in the k-th such window in a row (k at most 4), until a
// window shows a queue; the cut that follows is not taken for a slower
// service (see checkCut), as the queue the growth let in is still at the
// service. After the first (or from the first, with the in flight below
// knownAt by more than Headroom), such a window closes as soon as 64
// successes show it, or its last 64 alone do (see held). Such a window
// comes now and then from a limit at the service's concurrency, whose
// latency reads low by the noise: one step of (1 + Headroom) from there
// is where the limit aims anyway, and knownAt bounds it. At knownAt/2 in
// flight or fewer nothing can have queued, so the latency test is skipped
// there and such a window closes from 8 successes (see starved): a limit
// that drops of the service's own tail cut that low comes back even when
// a window of it takes 16 s. Without a queue, Waiting is 0 and only the
// latency counts.
//
// An unused limit (in flight never reached it) does not grow, and the
// latency moves it only down: a queue beyond a window's noise at the in
// flight demand brought says the service runs inFlight/(1 + q) at once,
// and the limit is cut to that × (1 + Headroom), as if it had been in use.
// A window in which more than a tenth of the samples were Dropped
// multiplies the limit by Backoff, or by twice the share that succeeded
// when that is less (at most halving); an unused limit is first brought
// down to the mean in flight the dropped requests started at, which is
// what lost them (seed 003's slowdown comes with 10 in flight under a
// limit of 20: cutting 20 to 18 changed nothing for 10 s while the
// service's queue timed its requests out). A drop now and then is the
// service's own tail, and backing off for each would hold the limit below
// capacity. Once the limit probes past one below the limit that last
// lost, and past what that cut left, the requests admitted there count
// apart: more than a tenth of them Dropped ends the probe when the window
// closes (one of the 8 a probe to 8 admits on seed 003, where waiting for
// the window's second drop lost one more request each service time).
// Growth then slows to an eighth of a request per window from one below
// the limit that lost them, and to a quarter of that for each loss in a
// row at the same limit (down to a 128th): for a service of a few workers
// whose clients' deadline is close to its latency, one request too many
// is a loss each time, so each probe costs a request. At an eighth per
// window a probe every eight windows of seed 003's slow service (14
// successes each) cost 0.9% of what it admitted, the whole of a 1% budget
// for timeouts, and a service that lost at 8 the last time will most
// likely lose at 8 again. Only halving for each loss (an eighth, a 16th),
// or a 16th from the first, left seed 003 at 1.2%, or slowed the growth
// back after capacity-drop's slow minute (docs/simulations.md).
//
// noLoad is learned from live traffic: never by pinning the limit low to
// measure it, which sheds healthy requests (envoyproxy/envoy#8337), and
// never from the queue the limit lets in, which makes a baseline creep up
// until nothing is shed (Netflix/concurrency-limits #165):
//
//   - the first estimate is the mean of a window of at least 256
//     successes with a standard error within 5% (or 512), that lasted four
//     mean latencies (for a constant service, 128 within 5% of each other
//     over 32 mean latencies). If the limit held the traffic back during
//     it (its mean in flight was 0.9 of the limit, or 0.8 with the limit
//     reached and, behind a queue, half the successes leaving requests
//     waiting), it may carry a queue the initial limit let in: the limit
//     halves, and goes on halving while the latency falls with it. The
//     first halving after which it does not fall says the limit before it
//     let in no queue worth the name: the limit goes back there, so that
//     learning sheds nothing the service has room for. At MinLimit the
//     halving ends, and the latency there is noLoad;
//   - knownAt is a concurrency at which latency is known to be noLoad; it
//     starts at the first window's, and rises by an eighth when firm
//     evidence from just above it is within Headroom/2 of noLoad, never
//     past limit / (1 + Headroom). A cut of more than Headroom caps it at
//     twice the concurrency the queue shows (in flight / (1 + q)): if
//     half the workers went, what starts at knownAt/2 in flight queues;
//   - successes that started with at most knownAt/2 in flight cannot have
//     queued (unless half the workers went): their pooled mean (once 256
//     of them give a standard error within 5%, or 2048 do: fewer, from a
//     tail-heavy service, put noLoad 8% off, and the limit and the
//     latency with it) moves noLoad half way to it, or all the way when
//     it is beyond (1 + Headroom) × noLoad by two standard errors: the
//     service itself slowed. Nothing is thrown out of the pool for being
//     slow: a pool that drops its slow windows learns a noLoad below the
//     service's mean, and holds the limit below its concurrency. A slower
//     service reads as a queue at first, and the cuts that follow are
//     what bring those successes;
//   - a cut of more than Headroom is checked: the window after the one
//     that still holds requests admitted before it (the limit holds
//     meanwhile) must show the latency fallen with the in flight, as a
//     queue's does (the throughput stays). If it fell by less than the
//     in flight by more than Headroom, two standard errors included, the
//     throughput fell with the in flight instead, which happens only
//     below the service's concurrency, where nothing queues: the service
//     slowed, noLoad is that window's latency, and the limit goes back to
//     the concurrency the window before the cut shows with it. This tells
//     a slower service within a few windows at any in flight, where the
//     evidence above needs a quarter of it;
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

	// cutFrom is the last window's mean in flight and latency when a cut
	// of more than Headroom was made, 0 when none is being checked (see
	// checkCut); cutSkip passes over the window that still holds requests
	// admitted before the cut.
	cutFrom, cutLat float64
	cutKnownAt      float64 // knownAt before the cut
	cutSkip         bool
	// ceiling is where Dropped samples last cut the limit from (the
	// limit, or for an unused one the drops' mean in flight), 0 once the
	// limit grew past it; probeAbove is the in flight above which a
	// request was admitted by a probe (see probing), set with it.
	ceiling    float64
	probeAbove float64
	// lost counts the drop cuts in a row at the same ceiling after the
	// first (0 after one): each quarters the growth near it (see
	// littleProbeSlow).
	lost int

	// tightLeft counts down the windows of littleFew successes or more
	// since the last whose standard deviation was within 5% of its mean,
	// from littleConstantMemory: while above 0 the service is constant,
	// and a window may close with fewer. Not only the last, because a
	// change of a constant service mixes two latencies in the window that
	// holds it, and in the next one when a cut leaves requests queued at
	// the service; without it the window after them would wait 16 mean
	// latencies (seed 003's slowdown: 29 s).
	tightLeft int

	win     littleWindow
	known   stat // successes at <= knownAt/2 in flight, pooled
	above   stat // successes just above knownAt, pooled
	faster  int  // windows in a row faster than noLoad allows
	fastSum stat // their latencies
	rush    int  // windows in a row in which the limit held demand back
	rushed  int  // windows left in which a cut is not checked
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
		headroom: cmp.Or(cfg.Headroom, 0.15),
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
		w.tail.drops++
		w.dropsAt += float64(s.InFlight)
		w.tail.dropsAt += float64(s.InFlight)
		if l.probing(s.InFlight) {
			w.probeDrops++
		}
	case s.Latency > 0:
		r, c := float64(s.Latency), float64(s.InFlight)
		w.add(r, c, s.Waiting > 0)
		w.tail.add(r, c, s.Waiting > 0)
		if l.probing(s.InFlight) {
			w.probeOK++
		}
		switch {
		case c <= l.knownAt/2:
			w.known.add(r)
		case c > l.knownAt && c <= l.knownAt+1+l.knownAt/8:
			l.above.add(r)
		}
	}
	w.maxInFlight = max(w.maxInFlight, s.InFlight)
	if !w.done(now) && !l.held(now) {
		return int(l.limit)
	}
	if l.noLoad == 0 && !w.overloaded() && !w.first(now) {
		return int(l.limit)
	}
	l.close(now)
	length := w.length
	if w.lat.n > 0 {
		length = time.Duration(w.lat.mean())
	}
	if w.lat.n >= littleFew {
		switch {
		case w.lat.tight():
			l.tightLeft = littleConstantMemory
		case l.tightLeft > 0:
			l.tightLeft--
		}
	}
	*w = littleWindow{start: now, length: length, constant: l.tightLeft > 0}
	return int(l.limit)
}

// probing reports whether a request that started at inFlight was admitted
// by a probe: past the ceiling less one, where the limit asks whether the
// service now takes more than the limit that last lost requests, and past
// what that drop cut left (a cut of 0.9 leaves a limit below 10 within one
// of the ceiling, and such a limit's every request would count).
func (l *Little) probing(inFlight int) bool {
	return l.ceiling > 0 && l.limit > l.ceiling-1 && float64(inFlight) > l.probeAbove
}

// held reports whether the open window, once the last one grew the limit
// because it held demand back (see Little), already shows the same at
// now, from 64 successes: nine in ten of them leaving requests waiting, at
// fewer in flight than knownAt and a latency below (1 + Headroom/2) ×
// noLoad by a standard error. It closes the window then: while the queue
// overflows, each full window sheds what it cannot hold. The first such
// window only when its in flight is below knownAt by more than Headroom:
// at the service's concurrency, 64 successes read low by their noise
// often enough to hold 1.27 × the workers on slow-ramp, and a limit
// settled there is not that far below knownAt. After a cut for lost
// workers it is (knownAt is then twice the concurrency the queue showed),
// and a block of 64 that reads low grows the limit one step, which the
// next window cuts back: workers-lost holds 1.19 × the workers in flight
// instead of 1.18, and when the workers return the limit grows a window
// sooner (docs/simulations.md has the rejections it saves).
//
// A window that began before the change mixes the latency of both sides
// (the queue the lost workers left, then none), and such a window waits
// to be firm, 170 successes of a lognormal service, while the limit's
// queue overflows. So the successes since the last block judged, once
// there are 64, are also judged alone, and a block that shows the limit
// holding demand back becomes the window, the samples before it dropped:
// it cuts workers-lost's rejections of requests sent after the return
// (docs/simulations.md has the figures).
func (l *Little) held(now time.Time) bool {
	w := &l.win
	if l.noLoad == 0 || l.probeFrom > 0 || l.cutFrom > 0 || now.Sub(w.start) < w.length {
		return false
	}
	if w.lat.n >= littleFew/2 && l.starved(w.littleBlock) {
		return true
	}
	if w.lat.n < littleWindowMin {
		return false
	}
	if l.rush == 0 && w.inFlight/w.lat.n >= l.knownAt/(1+l.headroom) {
		return false
	}
	if l.heldBack(w.littleBlock) {
		return true
	}
	// Its latest block alone (the first block is the window itself).
	t := w.tail
	if t.lat.n < littleWindowMin {
		return false
	}
	w.tail = littleBlock{}
	if t.lat.n == w.lat.n || !l.heldBack(t) {
		return false
	}
	w.littleBlock = t
	return true
}

// heldBack reports whether the window so far shows the limit, not the
// service, holding requests back: nine in ten of its successes left
// requests waiting for a permit, with fewer in flight than knownAt, and
// they ran at noLoad (below (1 + Headroom/2) × noLoad by a standard
// error), or the limit starved the service (see starved).
func (l *Little) heldBack(b littleBlock) bool {
	return l.starved(b) || b.waited > littleWaited*b.lat.n && b.inFlight/b.lat.n < l.knownAt &&
		b.lat.mean()+b.lat.se() < l.noLoad*(1+l.headroom/2)
}

// starved reports whether nine in ten of the successes left requests
// waiting for a permit with at most knownAt/2 in flight: what starts
// there cannot have queued (the premise of the no-load evidence), so the
// latency need not tell, and a window of a slow service at a small limit
// (16 s of seed 003's for 16 successes) cannot tell it within its noise
// anyway. Drops of a service's own tail cut the limit there: seed 003
// with a lognormal service of σ 0.3, a fifth of whose slow requests
// outlive the clients, ended its slow minute at 1 or 2 of 7 workers.
func (l *Little) starved(b littleBlock) bool {
	return b.lat.n > 0 && b.waited > littleWaited*b.lat.n && b.inFlight/b.lat.n <= l.knownAt/2
}

// close acts on the window that just closed.
func (l *Little) close(now time.Time) {
	w := &l.win
	if w.overloaded() {
		// What was dropped was admitted in vain: back off by Backoff, or
		// by the share dropped when more (at most by half).
		l.cut = dropCut(now)
		ok := w.lat.n / (w.lat.n + w.drops)
		// From the in flight that lost them, when the limit was not in
		// use: cutting a limit demand never reached changes nothing. The
		// in flight they started at, not the window's highest: on seed
		// 003 the requests that time out start at 8 and 9 in flight, the
		// window reaches 10, and a cut from it to 8 lost one request a
		// service time until the next window.
		from := l.limit
		if w.unused(l.limit) && w.drops > 0 {
			from = w.dropsAt / w.drops
		}
		if l.ceiling > 0 && math.Abs(from-l.ceiling) < 1 {
			l.lost = min(l.lost+1, littleProbeSlow)
		} else {
			l.lost = 0
		}
		l.limit = l.bounds.clamp(from * max(min(l.backoff, 2*ok), 0.5))
		l.ceiling, l.probeAbove = from, max(from-1, math.Floor(l.limit))
		if from <= l.knownAt/2 {
			// Not a ceiling: what started there did not queue, and its
			// drops were the service's own tail.
			l.ceiling, l.lost = 0, 0
		}
		return
	}
	if w.lat.n == 0 {
		return
	}
	latency, inFlight := w.lat.mean(), w.inFlight/w.lat.n
	if l.noLoad == 0 {
		l.noLoad, l.last = latency, latency
		l.knownAt = min(inFlight, l.limit/(1+l.headroom))
		// Saturated from the start: the latency may carry a queue. Nearly
		// always at the limit, or often there when the limit has no
		// queue to tell; with one, most requests must have left some
		// waiting for a permit (a limit that holds back a queue leaves
		// 75-93% in the scenarios, one that demand only touches on its
		// noise 15-29%).
		held := w.waited == 0 || w.waited > w.lat.n/2
		if inFlight >= 0.9*l.limit || inFlight >= 0.8*l.limit && float64(w.maxInFlight) >= l.limit && held {
			l.probe(latency)
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
			// It did not fall: the limit before this halving let in no
			// queue worth the name, and holding this one would shed what
			// the service has room for. Back to it; the latency decides
			// from there.
			l.noLoad, l.last = min(l.noLoad, latency), latency
			l.limit, l.probeFrom = l.probeFrom, 0
		}
		return
	}
	if l.cutFrom > 0 {
		if l.cutSkip {
			// Requests admitted before the cut: hold the limit until a
			// window of those admitted after it tells what the cut did.
			l.cutSkip = false
			l.last = latency
			return
		}
		l.checkCut(w.lat, inFlight)
	}
	l.learn(w.lat, w.known)
	q := latency/l.noLoad - 1
	if inFlight <= l.knownAt/2 {
		// Too few in flight to queue: what is above noLoad is noise, or a
		// slower service the known evidence is about to tell.
		q = min(q, 0)
	}
	f := min(max((1+l.headroom)/(1+q), 0.5), 1+l.headroom)
	if w.unused(l.limit) {
		// The latency says nothing about a limit not in use, unless it
		// shows a queue beyond the noise at the in flight demand brought,
		// which caps the service's concurrency there (below the limit,
		// as that in flight is).
		if f >= 1/(1+l.headroom) || math.Abs(math.Log(f)) < littleNoise*w.lat.se()/latency {
			return
		}
		f = inFlight * f / l.limit
	}
	l.rushed = max(l.rushed-1, 0)
	if l.heldBack(w.littleBlock) {
		// Requests waited for a permit, with fewer in flight than the
		// service is known to run at noLoad, and the admitted ones ran
		// at noLoad: the limit, not the service, held them back. From
		// the littleRushAfter-th such window in a row, grow undamped,
		// by (1 + Headroom) more each window.
		l.rush = min(l.rush+1, littleRushAfter+littleRush)
		if n := l.rush - littleRushAfter + 1; n > 0 {
			f = max(f, math.Pow(1+l.headroom, float64(min(n, littleRush))))
			// This window, the one that still holds what was admitted
			// before the growth, and the one checkCut would read.
			l.rushed = 3
		}
	} else {
		l.rush = 0
	}
	if l.rush < littleRushAfter && q > -l.headroom/2 && math.Abs(math.Log(f)) < littleNoise*w.lat.se()/latency {
		// A move within the window's noise: take a quarter of it, so
		// that the limit averages windows instead of following each.
		// Not when the latency shows no queue at all: a limit below the
		// service's concurrency costs throughput, one above it only a
		// little latency.
		f = math.Pow(f, littleGain)
	}
	switch {
	case f < 1/(1+l.headroom) && l.cutFrom == 0:
		if l.rushed == 0 {
			// Not just after a rush: the queue a rush overshoots into
			// is still at the service in the window checkCut would
			// read, and would pass for a slower service.
			l.cutFrom, l.cutLat, l.cutSkip = inFlight, latency, true
		}
		// A queue this long says the service runs at most inFlight/(1+q)
		// at once (its throughput × noLoad): below knownAt/2 if half the
		// workers went, and then what starts at knownAt/2 in flight may
		// queue. checkCut puts it back if the service only slowed.
		l.cutKnownAt = l.knownAt
		l.knownAt = min(l.knownAt, 2*inFlight/(1+q))
	case f > 1 && l.ceiling > 0 && l.limit*f > l.ceiling-1:
		// Near the limit that last lost requests, grow by an eighth of a
		// request per window, a quarter of that for each loss in a row
		// there: a small service (a few workers, a deadline close to its
		// latency) loses requests at each request too many, and probing
		// there fast would lose them often.
		f = min(f, max((l.ceiling-1)/l.limit, 1+1/(8*math.Ldexp(l.limit, 2*l.lost))))
		if l.limit*f > l.ceiling+1 {
			l.ceiling = 0 // past it without a cut: the service grew
		}
	}
	l.limit = l.bounds.clamp(l.limit * f)
}
