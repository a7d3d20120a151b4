package adaptive

import (
	"math"
	"time"
)

// littleWindow gathers one window of a Little limit.
type littleWindow struct {
	start  time.Time // zero before the first sample
	length time.Duration
	littleBlock
	known       stat // successes that started at <= knownAt/2 in flight
	maxInFlight int
	constant    bool // see Little.tightLeft
	// probeOK and probeDrops count the samples of requests a probe
	// admitted (see Little.probing).
	probeOK, probeDrops float64
	// tail is the window's samples since the last block Little.held
	// judged (a block is judged once it has littleWindowMin successes).
	tail littleBlock
}

// littleBlock sums a run of samples: the successes the held-back test
// reads, and the drops a window's close reads.
type littleBlock struct {
	lat      stat    // the successes' latencies, ns
	inFlight float64 // sum of the successes' InFlight
	waited   float64 // successes released with requests waiting
	drops    float64
	dropsAt  float64 // sum of the drops' InFlight
}

func (b *littleBlock) add(r, c float64, waited bool) {
	b.lat.add(r)
	b.inFlight += c
	if waited {
		b.waited++
	}
}

// Sample counts. A window closes after one mean latency once its mean is
// firm: littleWindowMin successes with a standard error within 5% of the
// mean, or littleWindowMax. A slow service sends few, so a window also
// closes with littleFew after 16 mean latencies, or with littleFew/2 after
// 2 if their mean is within 2% and one of the last littleConstantMemory
// windows of littleFew or more had a standard deviation within 5% of its
// mean (a constant service; see Little.tightLeft).
// The first estimate takes 4 × littleEvidence successes by the same rule,
// the evidence that raises knownAt 2 ×.
const (
	littleWindowMin = 64
	littleWindowMax = 512
	littleEvidence  = 64
	littleFew       = 16
	// No-load evidence moves noLoad once firm by the same rule from
	// littleKnown samples (or littleKnownMax), never sooner: 256 samples of
	// a tail-heavy service (bimodal's 90% 10 ms, 10% 100 ms) have a
	// standard error of 9%, and noLoad learned from them sat 8% above the
	// service's mean, the limit and the latency with it.
	littleKnown    = 256
	littleKnownMax = 2048
	// A move of the limit smaller than littleNoise standard errors of the
	// window's mean is taken to the power littleGain: a quarter of it.
	littleNoise = 3
	littleGain  = 0.25
	// littleDropShare is the share of a window's samples that must be
	// Dropped for the limit to back off.
	littleDropShare = 0.1
	// littleRush caps the growth of a limit that holds demand back at
	// (1 + Headroom)^littleRush per window.
	littleRush = 4
	// littleRushAfter is how many windows in a row must show the limit
	// holding demand back (see Little) before it grows undamped. One: each
	// window of waiting sheds what the queue cannot hold (after workers-
	// lost's workers return, 3 shed more than 1; docs/simulations.md has
	// the history), and a limit at the service's concurrency that reads
	// low by the noise grows one step of (1 + Headroom), to where it aims
	// anyway.
	littleRushAfter = 1
	// littleProbeSlow caps how many drop cuts in a row at the same
	// ceiling quarter the growth near it: from an eighth of a request per
	// window down to a 128th.
	littleProbeSlow = 2
	// littleConstantMemory is how many windows of littleFew or more a
	// constant service's last tight one counts for (see Little.tightLeft).
	littleConstantMemory = 3
	// littleWaited is the share of a window's successes that must have
	// been released with requests waiting for a permit.
	littleWaited = 0.9
)

// done reports whether the window can close at now.
func (w *littleWindow) done(now time.Time) bool {
	elapsed := now.Sub(w.start)
	switch {
	case elapsed < w.length:
		return false
	case w.overloaded(), w.lat.firm(littleWindowMin, littleWindowMax):
		return true
	case w.constant && w.lat.n >= littleFew/2 && elapsed >= 2*w.length && w.lat.se() <= 0.02*w.lat.mean():
		return true // a constant service: few samples tell its mean
	case w.lat.n < littleFew:
		return false
	}
	return elapsed >= 16*w.length
}

// first reports whether the window can give the first estimate at now,
// which judges everything after it: not from too few, and not too early
// (the first requests to finish are the fast ones). From four times the
// evidence of a window, over four mean latencies; or, for a service whose
// latencies are all within 5% of their mean, from two times over 32 (a
// constant service of 1 s at 5 rps took 51 s to give 256, and a slowdown
// at 60 s confused the start-up probe). Not fewer: 64 over 16 took the
// fast mode of a bimodal service (90% 10 ms, 10% 100 ms) for the service
// on one seed of five, its slow requests not finished yet.
func (w *littleWindow) first(now time.Time) bool {
	elapsed, mean := now.Sub(w.start), w.lat.mean()
	return w.lat.firm(4*littleEvidence, littleWindowMax) && elapsed >= 4*time.Duration(mean) ||
		w.lat.n >= 2*littleEvidence && elapsed >= 32*time.Duration(mean) && w.lat.tight()
}

// unused reports whether the window's in flight never reached limit: a
// limit not in use, which the latency cannot judge.
func (w *littleWindow) unused(limit float64) bool { return float64(w.maxInFlight) < limit-1 }

// overloaded reports whether more than a few of the window's samples
// were Dropped (see littleDropShare), or more than that share of those a
// probe admitted: one of a probe's 8 on seed 003, where waiting for a
// second drop in the window lost one more request each service time.
func (w *littleWindow) overloaded() bool {
	return w.probeDrops > littleDropShare*(w.probeOK+w.probeDrops) ||
		w.drops > max(1, littleDropShare*(w.lat.n+w.drops))
}

// stat is a count of latencies (ns), their sum and their sum of squares.
type stat struct{ n, sum, sumSq float64 }

func (s *stat) add(x float64) { s.n++; s.sum += x; s.sumSq += x * x }
func (s *stat) merge(o stat)  { s.n += o.n; s.sum += o.sum; s.sumSq += o.sumSq }
func (s stat) mean() float64  { return s.sum / s.n }

// sd returns the standard deviation.
func (s stat) sd() float64 {
	m := s.mean()
	return math.Sqrt(max(s.sumSq/s.n-m*m, 0))
}

// tight reports whether every latency is within about 5% of the mean (a
// standard deviation within 5%): a constant service.
func (s stat) tight() bool { return s.sd() <= 0.05*s.mean() }

// se returns the standard error of the mean.
func (s stat) se() float64 { return s.sd() / math.Sqrt(s.n) }

// firm reports whether the mean is known well enough to act on: from at
// least lo samples, a standard error within 5% of the mean, or hi samples
// (a constant service needs few, a heavy-tailed one many).
func (s stat) firm(lo, hi float64) bool {
	return s.n >= hi || s.n >= lo && s.se() <= 0.05*s.mean()
}
