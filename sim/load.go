package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// segment is a piece of the rate schedule: rate(t) = a + b·(t − start) for
// t in [start, end), times in seconds.
type segment struct{ start, end, a, b float64 }

// ArrivalRand is the random source of a scenario's arrivals for seed:
// NewArrivals drawn from it gives the simulator's send times, so a load
// generator that uses it sends what a simulated run models.
func ArrivalRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// Arrivals generates open-loop arrival times for a piecewise-constant or
// piecewise-linear rate by inverting the cumulative intensity: the next
// arrival is where the integral of the rate since the last one reaches 1
// (constant arrivals) or an Exp(1) draw (Poisson arrivals, which makes a
// non-homogeneous Poisson process exact even on a ramp). Bursts are not
// part of it. The simulator draws its arrivals from it, and sluice load
// sends at the same times to a real server.
type Arrivals struct {
	segs    []segment
	seg     int
	t       float64 // seconds, the last arrival
	poisson bool
	started bool
}

// NewArrivals returns the arrival process of l's rate.
func NewArrivals(l *Load) *Arrivals {
	g := &Arrivals{poisson: l.Arrivals == PoissonArrivals}
	type corner struct{ t, r float64 }
	cs := []corner{{0, l.Rate}}
	for _, st := range l.Steps {
		cs = append(cs, corner{st.At.Seconds(), st.Rate})
	}
	for i, c := range cs {
		s := segment{start: c.t, end: math.Inf(1), a: c.r}
		if i+1 < len(cs) {
			s.end = cs[i+1].t
			if l.Ramp {
				s.b = (cs[i+1].r - c.r) / (s.end - s.start)
			}
		}
		g.segs = append(g.segs, s)
	}
	return g
}

// RateAt returns l's nominal rate at t, in requests per second: what the
// schedule asks for, before the arrival process's own randomness.
func (l *Load) RateAt(t time.Duration) float64 {
	x := t.Seconds()
	for _, s := range NewArrivals(l).segs {
		if x < s.end {
			return max(s.a+s.b*(x-s.start), 0)
		}
	}
	return 0
}

// Next returns the next arrival time in seconds from the start, or false
// when the rate is zero from now on. rng draws the Poisson gaps.
func (g *Arrivals) Next(rng *rand.Rand) (float64, bool) {
	m := 1.0
	switch {
	case g.poisson:
		m = rng.ExpFloat64()
	case !g.started && g.segs[0].a > 0:
		m = 0 // constant arrivals start at time 0
	}
	g.started = true
	for g.seg < len(g.segs) {
		s := g.segs[g.seg]
		ra := max(s.a+s.b*(g.t-s.start), 0) // the rate now
		rem := math.Inf(1)
		if !math.IsInf(s.end, 1) {
			dt := s.end - g.t
			rem = ra*dt + s.b*dt*dt/2
		} else if ra == 0 {
			rem = 0
		}
		if m <= rem && (ra > 0 || s.b > 0) {
			if m > 0 {
				// Solve b/2·x² + ra·x = m in the form that is stable for b → 0.
				x := 2 * m / (ra + math.Sqrt(max(ra*ra+2*s.b*m, 0)))
				g.t += x
			}
			return g.t, true
		}
		m -= rem
		g.seg++
		if g.seg < len(g.segs) {
			g.t = g.segs[g.seg].start
		}
	}
	return 0, false
}
