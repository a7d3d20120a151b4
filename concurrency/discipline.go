package concurrency

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// The time-dependent rules of the disciplines: the wait bound (MaxWait and
// CoDel), the queue order (LIFO, adaptive LIFO) and the wait estimate.

// burstFactor is how many times MaxWaitServices' bound a waiter may wait
// while the queue has not stood (see expiryFor). Four: with the bound at
// four mean service times, two still told no to 8 requests of Poisson
// bursts below capacity over TestAdaptiveBars' files, three and four to
// none, and four kept the most goodput at exactly capacity
// (docs/simulations.md).
const burstFactor = 4

// timed reports whether the config makes decisions depend on time (a wait
// bound, CoDel's clock, or an Algorithm). When it does not, and neither the
// arrival nor any queued waiter has a deadline, now is never read: the
// Limiter then skips reading the clock, which costs as much as the rest of a
// queued decision.
func (c *Core) timed() bool {
	return c.cfg.MaxWait > 0 || c.cfg.MaxWaitServices > 0 || c.cfg.Discipline == CoDel || c.cfg.Discipline == AdaptiveLIFO || c.cfg.Algorithm != nil
}

// ewma folds sample x into the mean m with weight 1/8 (as TCP's smoothed
// RTT); the first sample sets the mean.
func ewma(m, x int64) int64 {
	if m == 0 {
		return x
	}
	return m + (x-m)/8
}

// expiryFor returns when a waiter arriving now (and pushed now) must leave
// the queue if no permit comes, and why.
//
// Fail at Scale's rule is "if the queue has not been empty for the last
// interval, the time spent in the queue is limited to target; otherwise to
// interval". A waiter in a queue non-empty since s meets a standing queue
// from s+interval on, so it may stay until max(arrival+target, s+interval).
// s cannot change while the waiter is queued (the queue is not empty), so
// the bound is fixed at arrival; and it is non-decreasing in arrival time,
// as is arrival+MaxWait, so the queue's head always expires first.
//
// MaxWaitServices (k mean service times, S) follows the same rule with
// target kS and interval burstFactor × kS: a burst that the queue drains
// is served, and only a queue that stands (overload) is held to kS. A
// bound of kS alone told no to Poisson bursts at 0.8× capacity as the
// limit learned, which the service had room for.
func (c *Core) expiryFor(now int64) (int64, sluice.Reason) {
	exp, why := int64(noDeadline), sluice.ReasonQueueTimeout
	if c.cfg.MaxWait > 0 {
		exp = satAdd(now, int64(c.cfg.MaxWait))
	}
	if c.cfg.MaxWaitServices > 0 && c.meanSvc > 0 {
		e, _ := c.servicesExpiry(now)
		// The mean service time moves, but expiry must not decrease in
		// arrival order (the head expires first): never before the
		// newest waiter's.
		if c.q.n > 0 {
			e = max(e, c.q.nodes[c.q.tail].expiry)
		}
		exp = min(exp, e)
	}
	if c.cfg.Discipline == CoDel || c.cfg.Discipline == AdaptiveLIFO {
		cd := c.codelExpiry(now, int64(c.cfg.CoDelTarget), int64(c.cfg.CoDelInterval))
		if cd < exp {
			exp, why = cd, sluice.ReasonShed
		}
	}
	return exp, why
}

// boundQueued gives the waiters queued before the first latency was seen
// the MaxWaitServices bound they would have had with it, now that the mean
// service time is known. Without one, every later waiter would inherit
// "no bound" from the tail (expiry must not decrease in arrival order),
// and a queue standing since before the first release would never be held
// to MaxWaitServices. Both the old bounds and the new ones are
// non-decreasing in arrival order, so their minimum is too.
func (c *Core) boundQueued() {
	if c.cfg.MaxWaitServices <= 0 {
		return
	}
	for i := c.q.head; i != none; i = c.q.nodes[i].next {
		nd := &c.q.nodes[i]
		e, ok := c.servicesExpiry(nd.enq)
		if !ok {
			return // the bound is too long to count: none
		}
		if e <= nd.expiry {
			nd.expiry, nd.expReason = e, sluice.ReasonQueueTimeout
		}
	}
}

// servicesExpiry is the MaxWaitServices bound of a waiter that arrived at
// enq (see expiryFor), with the mean service time known; !ok (and no
// deadline) when burstFactor × the bound overflows.
func (c *Core) servicesExpiry(enq int64) (int64, bool) {
	w := c.cfg.MaxWaitServices * float64(c.meanSvc)
	if burstFactor*w >= math.MaxInt64 {
		return noDeadline, false
	}
	return c.codelExpiry(enq, int64(w), int64(burstFactor*w)), true
}

// codelExpiry is Fail at Scale's bound for a waiter arriving now (see
// expiryFor): target once the queue has stood for interval, otherwise
// until interval after it was last empty.
func (c *Core) codelExpiry(now, target, interval int64) int64 {
	return max(satAdd(now, target), satAdd(c.nonEmptySince, interval))
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// lifoAt reports whether the queue serves newest first at now.
func (c *Core) lifoAt(now int64) bool {
	switch c.cfg.Discipline {
	case LIFO:
		return true
	case AdaptiveLIFO:
		return c.q.n > 0 && now-c.nonEmptySince >= int64(c.cfg.CoDelInterval)
	}
	return false
}

// estimate returns the wait a newcomer faces (see Core's doc), and false
// before any latency has been seen.
func (c *Core) estimate(lifo bool) (int64, bool) {
	if c.meanSvc == 0 {
		return 0, false
	}
	p := float64(c.q.n + 1)
	if lifo {
		p = 1
	}
	p += float64(max(0, c.inFlight-c.limit))
	w := p * float64(c.meanSvc) / float64(c.limit)
	if w >= math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(w), true
}

// slotEvery is the mean time between permits freeing up, the retry-after
// hint for rejections; 0 while unknown.
func (c *Core) slotEvery() time.Duration {
	return time.Duration(c.meanSvc / int64(c.limit))
}
