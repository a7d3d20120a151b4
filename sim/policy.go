package sim

import (
	"github.com/sluicehq/sluice"
)

// gate is a policy at work in one run: what sits between the clients and
// the origin. The engine calls it; it answers through engine.admit and engine.reject (now, or later from
// wake), and asks for wake calls with engine.wake.
type gate interface {
	// arrive is a request sent now.
	arrive(now int64, id int32, r *request)
	// release is the origin's answer to an admitted request.
	release(now int64, id int32, r *request, o sluice.Outcome, latency int64)
	// cancel is a client giving up on a request still waiting in the policy.
	cancel(now int64, id int32, r *request)
	// wake is the timer asked for with engine.wake.
	wake(now int64)
	limit() float64
	queued() int
}

func (NonePolicy) start(e *engine) (gate, error) { return noneGate{e}, nil }

// noneGate admits everything.
type noneGate struct{ e *engine }

func (p noneGate) arrive(_ int64, id int32, r *request)                { p.e.admit(id, r, 0) }
func (noneGate) release(int64, int32, *request, sluice.Outcome, int64) {}
func (noneGate) cancel(int64, int32, *request)                         {}
func (noneGate) wake(int64)                                            {}
func (noneGate) limit() float64                                        { return 0 }
func (noneGate) queued() int                                           { return 0 }

// tickerGate is seed 000's limiter (TickerPolicy): a time.Ticker puts a
// token every 1/Rate into a channel buffered to Burst (prefilled), and a
// request takes a token from the channel, waiting in FIFO order, up to
// MaxWait.
type tickerGate struct {
	e       *engine
	every   float64 // ns between ticks
	burst   int
	tokens  int
	ticks   int64 // ticks accounted for
	maxWait int64
	bound   int
	// q holds the waiting requests, FIFO, and those that left it early
	// (their client gave up) until they reach its head; live counts the
	// waiting ones, which the bound applies to.
	q     []int32
	qgen  []uint32
	qhead int
	live  int
	rate  float64
}

func (p TickerPolicy) start(e *engine) (gate, error) {
	b := max(p.Burst, 1)
	return &tickerGate{e: e, every: 1e9 / p.Rate, burst: b, tokens: b, maxWait: int64(p.MaxWait), bound: p.Queue, rate: p.Rate}, nil
}

// tickAt is the time of tick k, or never for a tick past the int64 clock
// (a rate so low that it never ticks within any run).
func (t *tickerGate) tickAt(k int64) int64 {
	if at := float64(k) * t.every; at < maxNanos {
		return int64(at)
	}
	return never
}

// advance applies the ticks up to now: each gives its token to the oldest
// waiter, or to the buffer if it has room (a full channel drops the tick).
// While anyone waits, wake calls come at every tick, so a grant is never
// late.
func (t *tickerGate) advance(now int64) {
	for {
		next := t.ticks + 1
		at := t.tickAt(next)
		if at > now {
			return
		}
		if t.waiting() == 0 {
			// Nobody waits: only the buffer's fill matters; jump.
			if k := t.lastTick(now); k > t.ticks {
				t.tokens = int(min(int64(t.tokens)+k-t.ticks, int64(t.burst)))
				t.ticks = k
			}
			return
		}
		t.ticks = next
		t.grantOne()
	}
}

// lastTick is the number of the last tick at or before now, as tickAt
// places them: the quotient now/every alone can be one short (tick 1 at
// 3/s is at 333333333 ns, and 333333333/333333333.33 truncates to 0), which
// lost the token of a tick due at the instant of an arrival.
func (t *tickerGate) lastTick(now int64) int64 {
	k := int64(float64(now) / t.every)
	for k > 0 && t.tickAt(k) > now {
		k--
	}
	for t.tickAt(k+1) <= now {
		k++
	}
	return k
}

func (t *tickerGate) waiting() int { return len(t.q) - t.qhead }

// trim drops the waiters at the head that gave up.
func (t *tickerGate) trim() {
	for t.waiting() > 0 {
		if r := t.e.req(t.q[t.qhead]); r.gen == t.qgen[t.qhead] && r.waiting {
			return
		}
		t.qhead++
	}
}

func (t *tickerGate) grantOne() {
	for t.waiting() > 0 {
		id, gen := t.q[t.qhead], t.qgen[t.qhead]
		t.qhead++
		if r := t.e.req(id); r.gen == gen && r.waiting {
			t.live--
			t.e.admit(id, r, 0)
			return
		}
	}
	if t.tokens < t.burst {
		t.tokens++
	}
}

func (t *tickerGate) arrive(now int64, id int32, r *request) {
	t.advance(now)
	t.expire(now)
	t.trim()
	if t.tokens > 0 && t.waiting() == 0 {
		t.tokens--
		t.e.admit(id, r, 0)
		return
	}
	if t.bound != Unbounded && t.live >= t.bound {
		reason := sluice.ReasonQueueFull
		if t.bound == 0 {
			reason = sluice.ReasonRate
		}
		t.e.reject(id, r, reason)
		return
	}
	if t.qhead > 0 && t.qhead >= len(t.q)/2 {
		// Reclaim the head's space once it is half the slice, not only
		// when the queue empties: a queue that never does would grow by
		// every request that ever waited. A compaction copies no more
		// entries than were popped since the last one.
		n := copy(t.q, t.q[t.qhead:])
		copy(t.qgen, t.qgen[t.qhead:])
		t.q, t.qgen, t.qhead = t.q[:n], t.qgen[:n], 0
	}
	t.q = append(t.q, id)
	t.qgen = append(t.qgen, r.gen)
	t.live++
	r.waiting = true
	t.rearm(now)
}

// expire rejects the waiters whose MaxWait has passed by now, oldest first.
func (t *tickerGate) expire(now int64) {
	if t.maxWait == 0 {
		return
	}
	for t.waiting() > 0 {
		id, gen := t.q[t.qhead], t.qgen[t.qhead]
		r := t.e.req(id)
		if r.gen == gen && r.waiting {
			if r.sent+t.maxWait > now {
				return
			}
			t.live--
			t.e.reject(id, r, sluice.ReasonQueueTimeout)
		}
		t.qhead++
	}
}

func (t *tickerGate) rearm(now int64) {
	if t.waiting() == 0 {
		return
	}
	next := t.tickAt(t.ticks + 1)
	if t.maxWait > 0 {
		next = min(next, t.e.req(t.q[t.qhead]).sent+t.maxWait)
	}
	t.e.wake(max(next, now))
}

func (t *tickerGate) wake(now int64) {
	t.advance(now)
	t.expire(now)
	t.rearm(now)
}

func (t *tickerGate) release(int64, int32, *request, sluice.Outcome, int64) {}
func (t *tickerGate) limit() float64                                        { return t.rate }
func (t *tickerGate) queued() int                                           { return t.live }

// cancel is a waiter's client giving up: it leaves the count at once, and
// the queue when it reaches the head.
func (t *tickerGate) cancel(now int64, _ int32, _ *request) {
	t.live--
	t.rearm(now)
}
