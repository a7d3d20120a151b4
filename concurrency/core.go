package concurrency

import (
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clock"
)

const noDeadline = math.MaxInt64

// Core is the concurrency limiter's decision state machine: the limit, the
// permits in flight, the queue and its discipline. It reads no clock (every
// method that depends on time takes now), starts no goroutine and blocks on
// nothing, so the simulator can run it in virtual time; the Limiter runs the
// same Core under its mutex with the real clock.
//
// A Core is not safe for concurrent use.
//
// The caller plays the waiters. An arrival is admitted, queued (the caller
// holds a WaiterID and waits for an Event naming it) or rejected. Methods
// that can end waits (Arrive, Release, SetLimit, Expire) return Events: the
// queued waiters granted a permit and those rejected, in order. The returned
// slice is reused by the next call; copy what you keep.
//
// Waits end in four ways: a permit frees up (Admitted event); the wait bound
// passes (MaxWait, MaxWaitServices: ReasonQueueTimeout; CoDel: ReasonShed) — call Expire at
// NextExpiry, or let the next Arrive or Release do it; the queue is full and
// a LIFO queue drops its oldest waiter for a newcomer (ReasonQueueFull); or
// the caller gives up and calls Remove. The Core does not watch callers'
// deadlines between calls; when a permit frees up for a waiter whose
// deadline is less than S (below) away, it skips it (ReasonDeadline): the
// work would most likely finish after its caller gave up.
//
// Admission on arrival is deadline-aware: when the Core has seen at least one
// released permit's latency it estimates the wait a newcomer faces as
//
//	wait ≈ (p + max(0, inFlight − limit)) × S / limit
//
// where S is the mean time a permit is held (an exponentially weighted
// moving average of released latencies, weight 1/8, cancelled permits excluded), p is
// the newcomer's place in the order of service (queued+1 in FIFO order, 1 in
// LIFO order), and the second term counts permits still held above a limit
// that shrank. A caller whose deadline is sooner than now + wait is rejected
// at once with ReasonDeadline instead of waiting to miss it.
//
// Make one with NewCore: the zero Core has no limit to decide by.
type Core struct {
	cfg   Config
	limit int
	// inFlight counts permits held. It may exceed limit after the limit
	// shrinks: held permits are never revoked.
	inFlight int
	q        queue
	// nonEmptySince is when the queue last went from empty to non-empty;
	// meaningful only while it is non-empty. CoDel's "not empty within the
	// last interval" is now - nonEmptySince >= interval.
	nonEmptySince int64
	meanSvc       int64 // ns; 0 until the first latency is seen
	events        []Event
	admitted      uint64
	rejected      [sluice.NumReasons]uint64
}

// Verdict is what became of an arrival.
type Verdict uint8

const (
	Admitted Verdict = iota // a permit was granted at once
	Queued                  // the caller waits; see Arrival.Waiter
	Rejected                // see Arrival.Reason
)

func (v Verdict) String() string {
	switch v {
	case Admitted:
		return "admitted"
	case Queued:
		return "queued"
	case Rejected:
		return "rejected"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Arrival is the Core's decision on one arrival.
type Arrival struct {
	Verdict Verdict
	// Token, for Admitted, is what to pass to Release: the number of permits
	// in flight with this one (the adaptive.Sample's InFlight).
	Token uint64
	// Waiter, for Queued, names the waiter in later Events and in Remove.
	Waiter WaiterID
	// ExpiresIn, for Queued, is how long from now the wait bound (MaxWait,
	// MaxWaitServices or CoDel) rejects the waiter if no permit comes first; 0 if the wait is
	// unbounded.
	ExpiresIn time.Duration
	// Reason and RetryAfter, for Rejected: the cause and a hint for when a
	// permit may be free (0 if unknown).
	Reason     sluice.Reason
	RetryAfter time.Duration
}

// Event ends one queued waiter's wait.
type Event struct {
	Waiter WaiterID
	// Admitted reports that the waiter now holds a permit; Token is what to
	// pass to Release. Otherwise the waiter was rejected for Reason.
	Admitted   bool
	Token      uint64
	Reason     sluice.Reason
	RetryAfter time.Duration
}

// NewCore returns a Core with no permit held and an empty queue.
func NewCore(cfg Config) (*Core, error) {
	c := new(Core)
	if err := c.init(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Core) init(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	c.cfg, c.limit = cfg, cfg.Limit
	c.q.init()
	return nil
}

// Arrive decides an arrival at now by a caller whose deadline is deadline
// (the zero Time for none). The Events are waiters that the arrival ended
// first: those whose wait bound passed by now, and the oldest waiter of a
// full LIFO queue.
func (c *Core) Arrive(now, deadline time.Time) (Arrival, []Event) {
	a := c.arrive(clock.FromTime(now), toNanos(deadline))
	return a, c.events
}

// TryArrive admits at once if a permit is free and no one is queued (it
// never jumps the queue), and otherwise rejects with ReasonLimit. It is the
// decision behind TryAcquire and needs no time.
func (c *Core) TryArrive() Arrival {
	if c.q.n == 0 && c.inFlight < c.limit {
		return c.admit()
	}
	return c.reject(sluice.ReasonLimit, c.slotEvery())
}

// Release returns a permit at now. token is the one the permit was granted
// with; o and latency are the work's outcome and duration. With an Algorithm,
// Success and Dropped feed it a sample and its answer becomes the limit.
// The Events are waiters expired by now and waiters granted the freed
// permit(s).
func (c *Core) Release(now time.Time, token uint64, o sluice.Outcome, latency time.Duration) []Event {
	if o > sluice.Ignore {
		o = sluice.Ignore
	}
	c.release(clock.FromTime(now), token, o, latency)
	return c.events
}

// Cancel returns a permit whose work never ran, at now: the slot is freed
// without a sample. The Events are as Release's.
func (c *Core) Cancel(now time.Time, token uint64) []Event {
	c.release(clock.FromTime(now), token, canceled, 0)
	return c.events
}

// canceled is the outcome the package uses inside for a cancelled permit;
// it is out of sluice's range, so no caller can pass it.
const canceled = sluice.Outcome(255)

// Remove takes a queued waiter out of the queue, for a caller that gave up
// (its context ended). It reports false if w is not queued: it was already
// admitted or rejected by an Event, or removed.
func (c *Core) Remove(w WaiterID) bool {
	i := c.q.lookup(w)
	if i == none {
		return false
	}
	c.q.remove(i)
	return true
}

// SetLimit sets the limit at now, clamped to [1, MaxLimit]. Growing it
// grants permits to waiters at once (the Events); shrinking it revokes
// nothing: permits held above the new limit stay held until released. With
// an Algorithm, its next sample overrides the limit set here.
func (c *Core) SetLimit(now time.Time, n int) []Event {
	c.setLimit(clock.FromTime(now), n)
	return c.events
}

// Expire rejects the waiters whose wait bound has passed by now and returns
// them as Events. Call it at NextExpiry to end waits on time; Arrive and
// Release also expire before they decide.
func (c *Core) Expire(now time.Time) []Event {
	c.events = c.events[:0]
	c.expireAt(clock.FromTime(now))
	return c.events
}

// NextExpiry returns when the next queued waiter's wait bound passes, and
// false if no queued waiter has one.
func (c *Core) NextExpiry() (time.Time, bool) {
	if c.q.n == 0 || c.q.nodes[c.q.head].expiry == noDeadline {
		return time.Time{}, false
	}
	return clock.ToTime(c.q.nodes[c.q.head].expiry), true
}

// Limit returns the current limit.
func (c *Core) Limit() int { return c.limit }

// InFlight returns the number of permits held.
func (c *Core) InFlight() int { return c.inFlight }

// Queued returns the number of waiters in the queue.
func (c *Core) Queued() int { return c.q.n }

// MeanService returns the estimator's mean permit holding time, 0 until a
// release with a latency has been seen.
func (c *Core) MeanService() time.Duration { return time.Duration(c.meanSvc) }

// Stats returns the Core's state and counters: admissions (at arrival and
// from the queue) and rejections by reason (at arrival and in the queue;
// waiters taken out by Remove are not rejections).
func (c *Core) Stats() sluice.Stats {
	s := sluice.Stats{Limit: float64(c.limit), InFlight: c.inFlight, Queued: c.q.n, Admitted: c.admitted}
	s.Rejected = c.rejected
	return s
}

func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return noDeadline
	}
	return clock.FromTime(t)
}

func (c *Core) arrive(now, deadline int64) Arrival {
	c.events = c.events[:0]
	if deadline <= now {
		return c.reject(sluice.ReasonDeadline, 0)
	}
	c.expireAt(now)
	if c.q.n == 0 && c.inFlight < c.limit {
		return c.admit()
	}
	if c.cfg.MaxQueue == 0 {
		return c.reject(sluice.ReasonLimit, c.slotEvery())
	}
	lifo := c.lifoAt(now)
	if deadline != noDeadline {
		if est, ok := c.estimate(lifo); ok && deadline-now < est {
			return c.reject(sluice.ReasonDeadline, time.Duration(est))
		}
	}
	if c.q.n == 0 {
		c.nonEmptySince = now
	}
	if c.q.n >= c.cfg.MaxQueue {
		if !lifo {
			return c.reject(sluice.ReasonQueueFull, c.slotEvery())
		}
		// LIFO serves the newest first, so the oldest waiter is the one
		// least likely to be served in time: it makes room. The queue
		// was not empty for it (with MaxQueue 1 it is for an instant):
		// nonEmptySince stays.
		c.rejectEvent(c.q.remove(c.q.head), sluice.ReasonQueueFull)
	}
	exp, why := c.expiryFor(now)
	a := Arrival{Verdict: Queued, Waiter: c.q.push(now, exp, deadline, why)}
	if exp != noDeadline {
		a.ExpiresIn = time.Duration(exp - now)
	}
	return a
}

func (c *Core) admit() Arrival {
	c.inFlight++
	c.admitted++
	return Arrival{Verdict: Admitted, Token: uint64(c.inFlight)}
}

func (c *Core) reject(r sluice.Reason, retryAfter time.Duration) Arrival {
	c.rejected[r]++
	return Arrival{Verdict: Rejected, Reason: r, RetryAfter: retryAfter}
}

func (c *Core) rejectEvent(w WaiterID, r sluice.Reason) {
	c.rejected[r]++
	c.events = append(c.events, Event{Waiter: w, Reason: r, RetryAfter: c.slotEvery()})
}

func (c *Core) release(now int64, token uint64, o sluice.Outcome, latency time.Duration) {
	c.events = c.events[:0]
	if c.inFlight > 0 {
		c.inFlight--
	}
	if o != canceled && latency > 0 {
		first := c.meanSvc == 0
		c.meanSvc = ewma(c.meanSvc, int64(latency))
		if first {
			c.boundQueued()
		}
	}
	// Deferred: the Algorithm is anyone's code, and if it panics the
	// permit freed above must still go to a waiter, or it waits behind a
	// free permit until some other event.
	defer func() {
		c.expireAt(now)
		c.grant(now)
	}()
	if c.cfg.Algorithm != nil && (o == sluice.Success || o == sluice.Dropped) {
		n := c.cfg.Algorithm.Observe(clock.ToTime(now), adaptive.Sample{Latency: latency, InFlight: int(min(token, MaxLimit)), Waiting: c.q.n, Outcome: o})
		c.limit = clampLimit(n)
	}
}

func (c *Core) setLimit(now int64, n int) {
	c.events = c.events[:0]
	c.limit = clampLimit(n)
	c.expireAt(now)
	c.grant(now)
}

func clampLimit(n int) int { return min(max(n, 1), MaxLimit) }

// grant hands free permits to waiters in the discipline's order, skipping
// (rejecting) those whose deadline is less than the mean time a permit is
// held away: admitted, they would most likely miss it, and hold a permit
// for work nobody waits for.
func (c *Core) grant(now int64) {
	for c.q.n > 0 && c.inFlight < c.limit {
		i := c.q.head
		if c.lifoAt(now) {
			i = c.q.tail
		}
		dl := c.q.nodes[i].deadline
		w := c.q.remove(i)
		if dl <= satAdd(now, c.meanSvc) {
			c.rejectEvent(w, sluice.ReasonDeadline)
			continue
		}
		c.inFlight++
		c.admitted++
		c.events = append(c.events, Event{Waiter: w, Admitted: true, Token: uint64(c.inFlight)})
	}
}

// expireAt rejects waiters whose wait bound has passed. Expiry is
// non-decreasing in arrival order, so they are all at the head.
func (c *Core) expireAt(now int64) {
	for c.q.n > 0 {
		nd := &c.q.nodes[c.q.head]
		if nd.expiry > now {
			return
		}
		r := nd.expReason
		c.rejectEvent(c.q.remove(c.q.head), r)
	}
}
