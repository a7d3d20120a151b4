package adaptive

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
)

// model is the synthetic service the property tests drive the algorithms
// with: Capacity requests run at full speed; beyond that they share it, so
// a request that starts with n in flight takes Base × max(1, n/Capacity)
// (times a uniform noise of ±Noise). Clients keep Demand requests wanting
// service (closed loop; 0 means always more than the limit), so in flight =
// min(limit, Demand). A request slower than Deadline (if set) ends Dropped
// at the deadline, as a client timeout would.
type model struct {
	Base     time.Duration
	Capacity int
	Demand   int
	Deadline time.Duration
	Noise    float64
	Seed     uint64
	// From SlowAt on, requests take SlowBase instead of Base: the service
	// itself got slower (seed 003's bad release).
	SlowAt   time.Duration
	SlowBase time.Duration
}

// run is the outcome of driving an algorithm through a model.
type run struct {
	// meanLimit and minLimit, maxLimit cover the second half of the run
	// (after convergence); meanLimit is weighted by time.
	meanLimit          float64
	minLimit, maxLimit int
}

type pending struct {
	end      time.Time
	latency  time.Duration
	inFlight int
	outcome  sluice.Outcome
}

type pendingHeap []pending

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drive runs alg against m for d of virtual time.
func (m model) drive(alg Algorithm, d time.Duration) run {
	rng := rand.New(rand.NewPCG(m.Seed, 1))
	var (
		h        pendingHeap
		inFlight int
		now      = epoch
		end      = epoch.Add(d)
		half     = epoch.Add(d / 2)
		r        = run{minLimit: 1 << 30}
		weighted float64
		last     = half
	)
	start := func() {
		inFlight++
		base := m.Base
		if m.SlowBase > 0 && !now.Before(epoch.Add(m.SlowAt)) {
			base = m.SlowBase
		}
		lat := float64(base) * max(1, float64(inFlight)/float64(m.Capacity))
		if m.Noise > 0 {
			lat *= 1 + m.Noise*(2*rng.Float64()-1)
		}
		p := pending{latency: time.Duration(lat), inFlight: inFlight, outcome: sluice.Success}
		if m.Deadline > 0 && p.latency > m.Deadline {
			p.latency, p.outcome = m.Deadline, sluice.Dropped
		}
		p.end = now.Add(p.latency)
		heap.Push(&h, p)
	}
	fill := func() {
		for inFlight < alg.Limit() && (m.Demand == 0 || inFlight < m.Demand) {
			start()
		}
	}
	fill()
	for len(h) > 0 {
		p := heap.Pop(&h).(pending)
		if p.end.After(end) {
			break
		}
		if p.end.After(half) {
			weighted += float64(alg.Limit()) * float64(p.end.Sub(last))
			last = p.end
		}
		now = p.end
		inFlight--
		l := alg.Observe(now, Sample{Latency: p.latency, InFlight: p.inFlight, Outcome: p.outcome})
		if now.After(half) {
			r.minLimit, r.maxLimit = min(r.minLimit, l), max(r.maxLimit, l)
		}
		fill()
	}
	r.meanLimit = weighted / float64(last.Sub(half))
	return r
}
