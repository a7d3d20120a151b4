package origin

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// sampler draws service times from a sim.Dist, as the simulator does: the
// lognormal is parameterised so that its mean (not its median) is Mean.
type sampler struct {
	kind      sim.DistKind
	mean      float64 // ns
	mu, sigma float64 // the lognormal's underlying normal
	tail      float64 // ns
	tailFrac  float64
}

func newSampler(d sim.Dist) sampler {
	s := sampler{kind: d.Kind, mean: float64(d.Mean), tail: float64(d.Tail), tailFrac: d.TailFraction}
	if d.Kind == sim.Lognormal {
		s.sigma = d.Sigma
		if s.sigma == 0 {
			s.sigma = 1
		}
		s.mu = math.Log(s.mean) - s.sigma*s.sigma/2
	}
	return s
}

func (s *sampler) draw(rng *rand.Rand) time.Duration {
	v := s.mean
	switch s.kind {
	case sim.Exponential:
		v = rng.ExpFloat64() * s.mean
	case sim.Lognormal:
		v = math.Exp(s.mu + s.sigma*rng.NormFloat64())
	case sim.Bimodal:
		if rng.Float64() < s.tailFrac {
			v = s.tail
		}
	}
	// A day bounds a draw from a long tail: far past any run, and it
	// cannot overflow a time.
	return time.Duration(min(max(v, 1), float64(24*time.Hour)))
}
