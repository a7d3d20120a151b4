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

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// arrival returns the next arrival of the rate process in seconds, or +Inf
// when the rate is zero from now on.
func (g *schedule) arrival() float64 {
	if t, ok := g.arr.Next(g.rng); ok {
		return t
	}
	return math.Inf(1)
}
