package load

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// schedule yields the intended send times of an open-loop load, as offsets
// from the start, in order. It is pure: the same load and seed give the
// same times, whatever the clock does. The arrivals are the simulator's
// (sim.Arrivals: steps or a ramp, constant or Poisson gaps, drawn from
// sim.ArrivalRand), so a real run with a scenario's seed sends what the
// simulated one models; bursts are merged in.
type schedule struct {
	arr     *sim.Arrivals
	rng     *rand.Rand
	next    float64 // seconds, the next rate arrival; +Inf: none
	burstAt float64 // seconds, the next burst; +Inf: none
	burstN  int     // requests left in the current burst
	bursts  sim.Bursts
	burstK  int // bursts started
}

func newSchedule(l sim.Load, seed uint64) *schedule {
	g := &schedule{arr: sim.NewArrivals(&l), rng: sim.ArrivalRand(seed), bursts: l.Bursts}
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

// seconds converts s to a Duration, saturating at the longest one. A send
// time past it (the second at a rate of 1e-12/s) must end the schedule, as
// any time past Duration does; converted as it came, a float64 beyond an
// int64's range, it was a negative offset, sent at once, and the next one
// too, without end.
func seconds(s float64) time.Duration {
	ns := math.Round(s * 1e9)
	if !(ns < math.MaxInt64) { // float64(math.MaxInt64) is 2^63, which does not fit
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// arrival returns the next arrival of the rate process in seconds, or +Inf
// when the rate is zero from now on.
func (g *schedule) arrival() float64 {
	if t, ok := g.arr.Next(g.rng); ok {
		return t
	}
	return math.Inf(1)
}
