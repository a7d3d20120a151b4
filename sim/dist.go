package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// Sampler draws service times from a Dist, as the simulator's origin does:
// a lognormal's mean (not its median) is the Dist's Mean. sluice origin
// draws with it, so a real origin serves what the model says.
type Sampler struct {
	kind       DistKind
	mean       float64 // ns
	mu, sigma  float64 // lognormal's underlying normal
	tail       float64 // ns
	tailFrac   float64
	meanActual float64 // ns, the distribution's true mean (for capacity)
}

// MaxSigma is the largest lognormal sigma a scenario may give. Past it the
// mean lives in draws too rare for a run to see, and the capacity that
// goodput is measured against (workers / mean) means nothing: one worker
// of mean 100 ms, 20 s at 1000 rps, served 31 rps at sigma 3, 55 at 5 and
// 1000 at 10, for a capacity of 10.
const MaxSigma = 2

// ServiceRand is the random source of a scenario's service times for seed:
// the simulator's origin draws from it, one draw per request as it starts
// service, in that order.
func ServiceRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 2)) }

// NewSampler returns the sampler of d, which must be valid (Validate).
func NewSampler(d Dist) Sampler {
	s := Sampler{kind: d.Kind, mean: float64(d.Mean), tail: float64(d.Tail), tailFrac: d.TailFraction}
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

// Mean is the distribution's mean (for a bimodal one, the weighted mean
// of its two modes): workers over it is the origin's capacity.
func (s *Sampler) Mean() time.Duration { return time.Duration(s.meanActual) }

// Draw returns a service time drawn from rng, at least 1 ns and capped far
// past any run.
func (s *Sampler) Draw(rng *rand.Rand) time.Duration { return time.Duration(s.draw(rng)) }

func (s *Sampler) draw(rng *rand.Rand) int64 {
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
