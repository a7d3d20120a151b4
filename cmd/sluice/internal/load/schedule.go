package load

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// schedule yields the intended send times of an open-loop load, as offsets
// from the start, in order. It is pure: the same load and seed give the
// same times, whatever the clock does. The arrivals follow the simulator's
// model: a piecewise-constant (steps) or piecewise-linear (ramp) rate,
// inverted through its cumulative intensity, with evenly spaced (constant)
// or exponential (Poisson) gaps; bursts are merged in.
type schedule struct {
	segs    []segment
	seg     int
	t       float64 // seconds, the last arrival
	poisson bool
	started bool
	rng     *rand.Rand

	next    float64 // seconds, the next rate arrival; +Inf: none
	burstAt float64 // seconds, the next burst; +Inf: none
	burstN  int     // requests left in the current burst
	bursts  sim.Bursts
	burstK  int // bursts started
}

// segment is a piece of the rate: rate(t) = a + b·(t − start) on [start, end).
type segment struct{ start, end, a, b float64 }

func newSchedule(l sim.Load, seed uint64) *schedule {
	g := &schedule{poisson: l.Arrivals == sim.PoissonArrivals, rng: rand.New(rand.NewPCG(seed, seed+1)), bursts: l.Bursts}
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
	g.next = g.arrival()
	g.burstAt = math.Inf(1)
	if l.Bursts.Size > 0 {
		g.burstAt = l.Bursts.At.Seconds()
	}
	return g
}

// Next returns the next intended send time, as an offset from the start;
// false when the schedule has no more sends.
func (g *schedule) Next() (time.Duration, bool) {
	if g.burstN == 0 && g.burstAt <= g.next && !math.IsInf(g.burstAt, 1) {
		g.burstN = g.bursts.Size
		g.burstK++
	}
	if g.burstN > 0 {
		g.burstN--
		at := g.burstAt
		if g.burstN == 0 {
			g.burstAt = math.Inf(1)
			if g.burstK < g.bursts.Count {
				g.burstAt = g.bursts.At.Seconds() + g.bursts.Every.Seconds()*float64(g.burstK)
			}
		}
		return seconds(at), true
	}
	if math.IsInf(g.next, 1) {
		return 0, false
	}
	at := g.next
	g.next = g.arrival()
	return seconds(at), true
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// arrival returns the next arrival of the rate process in seconds, or +Inf
// when the rate is zero from now on.
func (g *schedule) arrival() float64 {
	m := 1.0
	switch {
	case g.poisson:
		m = g.rng.ExpFloat64()
	case !g.started && g.segs[0].a > 0:
		m = 0 // constant arrivals start at time 0
	}
	g.started = true
	for g.seg < len(g.segs) {
		s := g.segs[g.seg]
		ra := max(s.a+s.b*(g.t-s.start), 0)
		rem := math.Inf(1)
		if !math.IsInf(s.end, 1) {
			dt := s.end - g.t
			rem = ra*dt + s.b*dt*dt/2
		} else if ra == 0 {
			rem = 0
		}
		if m <= rem && (ra > 0 || s.b > 0) {
			if m > 0 {
				// b/2·x² + ra·x = m, in the form stable as b → 0.
				g.t += 2 * m / (ra + math.Sqrt(max(ra*ra+2*s.b*m, 0)))
			}
			return g.t
		}
		m -= rem
		g.seg++
		if g.seg < len(g.segs) {
			g.t = g.segs[g.seg].start
		}
	}
	return math.Inf(1)
}
