package adaptive

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// roundTrip gathers the samples of one round trip. Vegas and Gradient2 move
// the limit once per round trip, as TCP does, not once per sample: every
// sample of a round trip reflects the same limit, and acting on each one
// would move the limit about limit times before the first consequence of
// the first move comes back — the overshoot that makes a per-sample
// controller swing between MinLimit and far above capacity.
type roundTrip struct {
	start       time.Time     // zero before the first sample
	length      time.Duration // closes at the first sample at or after start+length
	n           int           // successes with a latency
	sum         float64       // of their latencies, ns
	maxInFlight int
	dropped     bool
	// The least loaded successes: those that started near (see near)
	// lowInFlight, the fewest in flight of the round trip, counted from
	// the success that brought it down (see Vegas for why those before it
	// are dropped). Their mean is the round trip's best evidence of the
	// latency with no load.
	lowInFlight int
	lowN        int
	lowSum      float64
}

// add takes one sample and reports whether it closed the round trip; the
// caller then reads the aggregate and calls next.
func (w *roundTrip) add(now time.Time, s Sample) bool {
	if w.start.IsZero() {
		w.start = now
	}
	if w.length <= 0 {
		w.length = s.Latency // the first latency seen sets the first length
	}
	switch {
	case s.Outcome == sluice.Dropped:
		w.dropped = true
	case s.Latency > 0:
		w.n++
		w.sum += float64(s.Latency)
		if w.lowN == 0 || s.InFlight < w.lowInFlight {
			w.lowInFlight, w.lowN, w.lowSum = s.InFlight, 0, 0
		}
		if near(s.InFlight, w.lowInFlight) {
			w.lowN++
			w.lowSum += float64(s.Latency)
		}
	}
	w.maxInFlight = max(w.maxInFlight, s.InFlight)
	return !now.Before(w.start.Add(w.length))
}

// mean returns the mean latency of the round trip's successes (ns), 0 if none.
func (w *roundTrip) mean() float64 {
	if w.n == 0 {
		return 0
	}
	return w.sum / float64(w.n)
}

// low returns the mean latency (ns) of the round trip's least loaded
// successes, how many they are and the fewest in flight they started with;
// zeros if there are none.
func (w *roundTrip) low() (mean float64, count, inFlight int) {
	if w.lowN == 0 {
		return 0, 0, 0
	}
	return w.lowSum / float64(w.lowN), w.lowN, w.lowInFlight
}

// next opens the following round trip at now; it lasts the mean latency of
// the one that closed, or as long as that one if it had no success.
func (w *roundTrip) next(now time.Time) {
	length := w.length
	if m := w.mean(); m > 0 {
		length = time.Duration(m)
	}
	*w = roundTrip{start: now, length: length}
}

// near reports whether a request that started with n in flight ran under
// about the same load as one that started with ref: at most an eighth
// more, plus one. Latency baselines learned at ref are judged, and
// re-learned, only from requests near it (see Vegas and Gradient2); the
// slack keeps a limit one or two above ref from locking them out.
func near(n, ref int) bool { return n <= ref+ref/8+1 }

// overdue returns s as Dropped if it is a Success slower than timeout
// (when timeout > 0): the client it answered had given up.
func overdue(s Sample, timeout time.Duration) Sample {
	if timeout > 0 && s.Outcome == sluice.Success && s.Latency > timeout {
		s.Outcome = sluice.Dropped
	}
	return s
}

// dropCut is when the limit was last cut for a drop; zero before.
type dropCut time.Time

// answered reports whether s is a drop of a request that started before
// the cut: the cut already answered it.
func (c dropCut) answered(now time.Time, s Sample) bool {
	t := time.Time(c)
	return s.Outcome == sluice.Dropped && !t.IsZero() && !now.Add(-s.Latency).After(t)
}

// learnable reports whether s is an outcome an algorithm learns from.
// Limiters never pass Ignore or a cancelled permit (see Sample); should one arrive,
// it is dropped rather than read as a success.
func learnable(s Sample) bool {
	return s.Outcome == sluice.Success || s.Outcome == sluice.Dropped
}

// ewma is an exponentially weighted moving average over about n samples
// (weight 2/(n+1)) that starts as the plain mean of its first samples, so
// the first sample does not weigh as much as the next hundred.
type ewma struct {
	n     int
	count int
	value float64
}

// ewmaWarmup is how many first samples an ewma averages plainly.
const ewmaWarmup = 10

// warm reports whether the warm-up samples are in.
func (e *ewma) warm() bool { return e.count >= min(ewmaWarmup, e.n) }

func (e *ewma) add(x float64) float64 {
	if !e.warm() {
		e.count++
		e.value += (x - e.value) / float64(e.count)
		return e.value
	}
	w := 2 / float64(e.n+1)
	e.value += (x - e.value) * w
	return e.value
}

// log10Step is Netflix's step function for Vegas: max(1, floor(log10(l))).
// It is 1 below a limit of 100, 2 below 1000, and so on: larger limits move
// in larger steps and tolerate longer queues.
func log10Step(l float64) float64 {
	return max(1, math.Floor(math.Log10(max(l, 1))))
}
