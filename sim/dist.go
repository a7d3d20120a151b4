package sim

import (
	"math"
	"math/rand/v2"
)

// sampler draws service times, in nanoseconds, from a Dist.
type sampler struct {
	kind       DistKind
	mean       float64 // ns
	mu, sigma  float64 // lognormal's underlying normal
	tail       float64 // ns
	tailFrac   float64
	meanActual float64 // ns, the distribution's true mean (for capacity)
}

func newSampler(d Dist) sampler {
	s := sampler{kind: d.Kind, mean: float64(d.Mean), tail: float64(d.Tail), tailFrac: d.TailFraction}
	s.meanActual = s.mean
	switch d.Kind {
	case Lognormal:
		s.sigma = d.Sigma
		if s.sigma == 0 {
			s.sigma = 1
		}
		// Choose mu so that the mean, not the median, is d.Mean.
		s.mu = math.Log(s.mean) - s.sigma*s.sigma/2
	case Bimodal:
		s.meanActual = (1-s.tailFrac)*s.mean + s.tailFrac*s.tail
	}
	return s
}

func (s *sampler) draw(rng *rand.Rand) int64 {
	var v float64
	switch s.kind {
	case Exponential:
		v = rng.ExpFloat64() * s.mean
	case Lognormal:
		v = math.Exp(s.mu + s.sigma*rng.NormFloat64())
	case Bimodal:
		v = s.mean
		if rng.Float64() < s.tailFrac {
			v = s.tail
		}
	default:
		v = s.mean
	}
	if v < 1 {
		return 1
	}
	if v > maxNanos {
		return maxNanos
	}
	return int64(v)
}

// maxNanos caps a drawn time at about 292 years' worth of nanoseconds / 2,
// far past any run, so that adding it to a time cannot overflow.
const maxNanos = 1 << 62
