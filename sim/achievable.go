package sim

import "math"

// oracle computes the achievable goodput: what a server of the origin's
// capacity (requests a second, workers / mean service time) would serve of
// the demand if nothing were lost to a policy's choices. It serves the
// requests due, oldest first, as a fluid at the capacity of the moment; a
// request not served by its client's deadline is lost, one without a
// deadline waits as long as it takes. So demand above capacity carries to
// a later lull while its clients still wait (seed 002's thousand tasks at
// once, seed 001's bursts), where taking min(demand, capacity) interval by
// interval had the demand of a burst's interval lost at its end, and
// policies that queued it served many times "the achievable".
//
// Oldest first is the order that serves the most before deadlines that all
// lie the same time after their arrival. A fluid is the upper bound: a real
// origin cannot split a request among workers, and its service times vary.
type oracle struct {
	timeout int64   // ns from due to the client's deadline; 0: none
	grain   int64   // due times closer than this share a batch
	rate    float64 // requests per ns
	t       float64 // ns: served up to here
	q       []batch // waiting, oldest first, from head
	head    int
	served  float64 // requests served since the last take
}

// batch is requests due at about the same time: they wait until the
// deadline of the first (a request leaves a batch at most grain early).
type batch struct {
	deadline float64 // ns
	left     float64 // requests not yet served
}

func newOracle(timeout int64) oracle {
	// A batch per 1/1024 of the timeout bounds the queue to about 1024
	// batches a timeout, whatever the rate, at a cost of 0.1% of it.
	return oracle{timeout: timeout, grain: max(timeout/1024, 1)}
}

// due adds a request due at now.
func (o *oracle) due(now int64) {
	o.advance(now)
	d := math.Inf(1)
	if o.timeout > 0 {
		d = float64(now + o.timeout)
	}
	if n := len(o.q); n > o.head && (o.timeout == 0 || d-o.q[n-1].deadline < float64(o.grain)) {
		o.q[n-1].left++
		return
	}
	if o.head > 0 && o.head >= len(o.q)/2 {
		o.q = append(o.q[:0], o.q[o.head:]...) // reclaim the served
		o.head = 0
	}
	o.q = append(o.q, batch{deadline: d, left: 1})
}

// setRate makes the capacity c requests a second from now on.
func (o *oracle) setRate(now int64, c float64) {
	o.advance(now)
	o.rate = c / 1e9
}

// advance serves the queue up to now.
func (o *oracle) advance(now int64) {
	to := float64(now)
	for o.t < to && o.head < len(o.q) {
		b := &o.q[o.head]
		if b.deadline <= o.t {
			o.head++ // expired
			continue
		}
		// At a rate of 0, can is 0 and left (never 0) more: no capacity,
		// the batch waits for it or for its deadline.
		stop := min(to, b.deadline)
		if can := o.rate * (stop - o.t); b.left > can {
			b.left -= can
			o.served += can
			o.t = stop
			continue
		}
		o.t += b.left / o.rate
		o.served += b.left
		o.head++
	}
	// Idle (or waiting for capacity) until now: nothing to carry.
	o.t = max(o.t, to)
}

// take returns what was served since the last take, up to now.
func (o *oracle) take(now int64) float64 {
	o.advance(now)
	s := o.served
	o.served = 0
	return s
}
