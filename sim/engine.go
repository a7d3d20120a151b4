package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// never is a time that never comes; as a deadline it is waitrule.NoDeadline
// (both math.MaxInt64), so a request's deadline goes to the rule as is.
const never = math.MaxInt64

// request is one attempt. Requests live in a pool (engine.pool) and are
// named by index, so a run allocates only while the pool grows to its peak.
type request struct {
	gen      uint32
	attempt  uint16
	waiting  bool // queued in the policy
	holding  bool // admitted by the policy, permit not yet released
	clientOK bool // the client still waits for this attempt
	oqueued  bool // in the origin's queue
	answered bool // the origin already answered (its timeout); still busy
	sent     int64
	// first is the request's intended send time, its first attempt's: a
	// retry is the same request, with the same deadline and a latency
	// from first, as a load generator measures from the intended send.
	first    int64
	deadline int64 // never: no deadline
	admitted int64
	token    uint64 // the policy's permit token
	handle   uint64 // the policy's waiter handle
}

// engine runs one policy against a fresh origin in virtual time (ns since
// the start of the run).
type engine struct {
	sc         *Scenario
	now        int64
	end        int64
	h          eventHeap
	dls        eventFIFO // client deadlines, in time order
	otos       eventFIFO // origin timeouts, in time order
	seq        uint64
	tick       int64 // the interval width
	nextChange int
	pool       [][]request // chunks of chunkSize: a *request stays valid as the pool grows
	npool      int32
	free       []int32

	rngArr, rngSvc, rngRetry *rand.Rand

	pol gate
	org origin
	arr *Arrivals
	m   metrics

	timeout     int64 // client deadline, 0: none
	clientCap   int
	clientBusy  int
	retryTokens float64
	inFlight    int // admitted by the policy, not yet released
	simulated   int64

	wakePending bool
	wakeAt      int64

	// bySend counts the successes of attempts sent in the measured window,
	// including those answered after the end (drain).
	bySend int64

	// full is set when more than maxLive requests are alive at once: the
	// run stops and reports where they were (overflow).
	full bool
}

func newEngine(sc *Scenario, pi int) (*engine, error) {
	interval := sc.Interval
	if interval == 0 {
		interval = time.Second
	}
	e := &engine{
		sc:        sc,
		end:       int64(sc.Duration),
		rngArr:    ArrivalRand(sc.Seed),
		rngSvc:    ServiceRand(sc.Seed),
		rngRetry:  rand.New(rand.NewPCG(sc.Seed, 3)),
		arr:       NewArrivals(&sc.Load),
		m:         newMetrics(int64(sc.Warmup), int64(sc.Duration), int64(sc.Load.Timeout), int(sc.Duration/interval)+1),
		timeout:   int64(sc.Load.Timeout),
		clientCap: sc.Load.ClientWorkers,
	}
	e.org = newOrigin(&sc.Origin)
	e.m.capacity(0, e.org.capacity())
	pol, err := sc.Policies[pi].start(e)
	if err != nil {
		return nil, err
	}
	e.pol = pol

	e.tick = int64(interval)
	e.schedule(min(e.tick, e.end), evTick, 0, 0)
	e.scheduleChange()
	if b := sc.Load.Bursts; b.Size > 0 && int64(b.At) < e.end {
		e.schedule(int64(b.At), evBurst, 0, 0)
	}
	e.nextArrival()
	return e, nil
}

// t converts virtual time to the time.Time the decision code takes: v
// nanoseconds after the clock's epoch. Any origin would do, since the
// decision code looks only at differences (a rate bucket is full at its
// first decision whatever the time: TestBucketStartsFull); a fixed one
// keeps a run from depending on when it ran.
func (e *engine) t(v int64) time.Time { return clock.ToTime(v) }

func (e *engine) schedule(at int64, k evKind, id int32, gen uint32) {
	e.seq++
	e.h.push(event{at: at, seq: e.seq, id: id, gen: gen, kind: k}, e.due)
}

// wake asks for the policy's wake method to be called at at (or earlier).
func (e *engine) wake(at int64) {
	// Not before now: run clears wakePending when the event with time
	// wakeAt fires, and an event is never scheduled in the past.
	at = max(at, e.now)
	if e.wakePending && e.wakeAt <= at {
		return
	}
	e.wakePending, e.wakeAt = true, at
	e.schedule(at, evWake, 0, 0)
}

// scheduleChange schedules the next origin change, if any. Changes and
// ticks are scheduled one at a time to keep the heap small.
func (e *engine) scheduleChange() {
	if cs := e.sc.Origin.Changes; e.nextChange < len(cs) {
		e.schedule(int64(cs[e.nextChange].At), evChange, int32(e.nextChange), 0)
		e.nextChange++
	}
}

// scheduleFIFO schedules an event on one of the FIFOs, whose times never
// decrease.
func (e *engine) scheduleFIFO(f *eventFIFO, at int64, k evKind, id int32, gen uint32) {
	e.seq++
	f.push(event{at: at, seq: e.seq, id: id, gen: gen, kind: k}, e.due)
}

// due reports whether ev still has something to do when it fires: an
// event of a request slot reused since does nothing, nor does a client
// deadline whose client no longer waits on that attempt, nor an origin
// timeout for a request the origin has answered. fireEvent fires only the
// events due; the heap and the FIFOs drop the others when full, so that
// they hold about the events of the requests alive, not of every request
// within a timeout's span.
func (e *engine) due(ev *event) bool {
	switch ev.kind {
	case evRetry, evDeadline, evComplete, evOriginTimeout, evRefuse, evGrant:
	default:
		return true // not a request's: id is no request slot
	}
	r := e.req(ev.id)
	switch {
	case r.gen != ev.gen:
		return false
	case ev.kind == evDeadline:
		return r.clientOK
	case ev.kind == evOriginTimeout:
		return r.holding
	}
	return true
}

// next pops the earliest event of the heap and the FIFOs.
func (e *engine) next() (event, bool) {
	var best *event
	if len(e.h) > 0 {
		best = &e.h[0]
	}
	from := 0
	if e.dls.n > 0 && (best == nil || before(e.dls.peek(), best)) {
		best, from = e.dls.peek(), 1
	}
	if e.otos.n > 0 && (best == nil || before(e.otos.peek(), best)) {
		best, from = e.otos.peek(), 2
	}
	if best == nil || best.at > e.end {
		return event{}, false
	}
	switch from {
	case 1:
		return e.dls.pop(), true
	case 2:
		return e.otos.pop(), true
	}
	return e.h.pop(), true
}

func (e *engine) run() {
	for !e.full {
		ev, ok := e.next()
		if !ok {
			return
		}
		e.fireEvent(ev)
	}
}

// drain goes on past the end of the run, with no new sends and no retries,
// until every client has had its answer or given up: at its deadline, or
// without one for another Duration at most (as sluice load waits). The
// summary has been taken: only bySend still counts, so that a real run's
// count, by intended send time however late the answer, has its match.
func (e *engine) drain() {
	if e.timeout > 0 {
		e.end += e.timeout
	} else {
		e.end += int64(e.sc.Duration)
	}
	for !e.full && e.clientBusy > 0 {
		ev, ok := e.next()
		if !ok {
			return
		}
		e.fireEvent(ev)
	}
}

// fireEvent advances the clock to ev and does what it says.
func (e *engine) fireEvent(ev event) {
	e.now = ev.at
	switch ev.kind {
	case evArrival:
		e.send()
		e.nextArrival()
	case evBurst:
		// Request gen of burst id. A burst's requests reach the policy one
		// after another, a nanosecond apart, as they do over sockets: were
		// they simultaneous, the one that makes a queue form (say the 51st
		// at a limit of 50) would do so at the instant of the first, and a
		// wait bound counted from it (CoDel's interval) would pass at the
		// very instant a burst as far ahead arrives, not after its first
		// requests.
		b := e.sc.Load.Bursts
		e.send()
		if k := ev.gen + 1; int(k) < b.Size && e.now+1 < e.end {
			e.schedule(e.now+1, evBurst, ev.id, k)
		}
		if n := int(ev.id) + 1; ev.gen == 0 && n < b.Count {
			if at := int64(b.At) + int64(n)*int64(b.Every); at < e.end {
				e.schedule(at, evBurst, int32(n), 0)
			}
		}
	case evWake:
		if ev.at == e.wakeAt {
			e.wakePending = false
		}
		e.pol.wake(e.now)
	case evTick:
		e.closeInterval()
		if e.now < e.end {
			e.schedule(min(e.now+e.tick, e.end), evTick, 0, 0)
		}
	case evChange:
		e.org.change(e, &e.sc.Origin.Changes[ev.id])
		e.scheduleChange()
	default:
		if e.due(&ev) {
			e.fire(ev.kind, ev.id, e.req(ev.id))
		}
	}
}

func (e *engine) fire(k evKind, id int32, r *request) {
	switch k {
	case evRetry:
		// The run is over, at its very end (outside the window, when no
		// request is sent either) or in the drain: the client stops.
		if e.now >= e.m.end {
			r.clientOK = false
			e.clientBusy--
			e.maybeFree(id, r)
			return
		}
		e.start(id, r)
	case evDeadline:
		e.giveUp(id, r)
	case evComplete:
		e.org.complete(e, id, r)
	case evOriginTimeout:
		e.org.timeout(e, id, r)
	case evRefuse:
		e.answer(id, r, cRefused)
	case evGrant:
		e.pol.(*bucketGate).grant(id, r)
	}
}

func (e *engine) nextArrival() {
	t, ok := e.arr.Next(e.rngArr)
	// Round to the nanosecond: constant arrivals accumulate float error, and
	// the 100th arrival at 100 rps belongs at 1 s, not 0.99999999999 s.
	at := math.Round(t * 1e9)
	if !ok || at >= float64(e.end) {
		return // a request sent at the very end could not be answered
	}
	e.schedule(int64(at), evArrival, 0, 0)
}

const chunkSize = 1024

// req returns request id. Pointers to requests never move: the pool grows
// by chunks, so code holding r across an alloc (a retry) stays correct.
func (e *engine) req(id int32) *request { return &e.pool[id/chunkSize][id%chunkSize] }

func (e *engine) alloc() (int32, *request) {
	var id int32
	if n := len(e.free); n > 0 {
		id = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		if e.npool >= maxLive {
			e.full = true // run stops after this event
		}
		if int(e.npool)%chunkSize == 0 {
			e.pool = append(e.pool, make([]request, chunkSize))
		}
		id = e.npool
		e.npool++
	}
	r := e.req(id)
	*r = request{gen: r.gen + 1}
	return id, r
}

// maybeFree returns the slot once neither the client, the policy nor the
// origin holds the request.
func (e *engine) maybeFree(id int32, r *request) {
	if r.clientOK || r.waiting || r.holding || r.oqueued || r.answered {
		return
	}
	r.gen++
	e.free = append(e.free, id)
}

// send is a first attempt, due now.
func (e *engine) send() {
	e.m.due(e.now)
	if e.clientCap > 0 && e.clientBusy >= e.clientCap {
		e.m.inc(e.now, cUnsent)
		return
	}
	e.clientBusy++
	e.retryTokens = min(e.retryTokens+e.sc.Load.Retries.Budget, 10)
	id, r := e.alloc()
	e.start(id, r)
}

// start sends attempt id now and asks the policy. A first attempt sets the
// request's deadline; a retry keeps it (fail sends none at or past it).
func (e *engine) start(id int32, r *request) {
	e.simulated++
	e.m.inc(e.now, cSent)
	if r.attempt > 0 {
		// Counted as sent, like Sent: one scheduled before the end and
		// due after it is never sent.
		e.m.inc(e.now, cRetry)
	}
	r.clientOK = true
	r.sent = e.now
	if r.attempt == 0 {
		r.first, r.deadline = e.now, never
		if e.timeout > 0 {
			r.deadline = e.now + e.timeout
			e.scheduleFIFO(&e.dls, r.deadline, evDeadline, id, r.gen)
		}
	} else if r.deadline != never {
		// Earlier than the deadlines of first attempts sent since, and the
		// FIFO's times must not decrease: on the heap.
		e.schedule(r.deadline, evDeadline, id, r.gen)
	}
	e.pol.arrive(e.now, id, r)
}

// admit is the policy's grant: the request goes to the origin.
func (e *engine) admit(id int32, r *request, token uint64) {
	r.waiting = false
	r.holding = true
	r.token = token
	r.admitted = e.now
	e.inFlight++
	e.m.admitted(e.now, e.now-r.sent)
	e.org.submit(e, id, r)
}

// reject is the policy's refusal.
func (e *engine) reject(id int32, r *request, reason sluice.Reason) {
	r.waiting = false
	e.m.reject(e.now, reason, e.now-r.sent)
	e.fail(id, r)
}

// answer is the origin's response to a request that held a permit: a
// success if the client still waits, otherwise the counter c.
func (e *engine) answer(id int32, r *request, c int) {
	o := sluice.Dropped
	if c == cCompleted {
		e.m.inc(e.now, cCompleted)
		if r.answered {
			r.answered = false
			e.m.inc(e.now, cWasted)
			e.maybeFree(id, r)
			return // released at the origin's timeout
		}
		if r.clientOK {
			o = sluice.Success
			e.m.success(e.now, e.now-r.first, e.now-r.admitted)
			if e.m.measured(r.first) {
				e.bySend++
			}
			r.clientOK = false
			e.clientBusy--
		} else {
			e.m.inc(e.now, cWasted)
		}
	} else {
		e.m.inc(e.now, c)
		if c == cRefused {
			e.m.rejectedSent(r.sent)
		}
		if r.clientOK {
			e.fail(id, r)
		}
	}
	r.holding = false
	e.inFlight--
	e.pol.release(e.now, id, r, o, e.now-r.admitted)
	e.maybeFree(id, r)
}

// giveUp is the client's deadline, its client still waiting (due): it
// stops waiting.
func (e *engine) giveUp(id int32, r *request) {
	e.m.inc(e.now, cTimeout)
	if r.waiting {
		r.waiting = false
		e.pol.cancel(e.now, id, r)
	}
	e.fail(id, r)
}

// fail ends the client's wait for r unsuccessfully and retries if allowed.
func (e *engine) fail(id int32, r *request) {
	e.m.inc(e.now, cFailed)
	r.clientOK = false
	rt := e.sc.Load.Retries
	// No retry in the drain, which fires only events after the end (run
	// fires every one up to it).
	retry := e.now <= e.m.end && int(r.attempt) < rt.Max && (rt.Budget == 0 || e.retryTokens >= 1)
	var wait int64
	if retry && rt.Backoff > 0 {
		// Capped so that a long backoff's 2^30 cannot overflow the clock.
		wait = int64(min(e.rngRetry.Float64()*float64(rt.Backoff)*float64(uint64(1)<<min(r.attempt, 30)), maxNanos))
	}
	// The retry keeps the request's deadline: once it has passed, or would
	// before the backoff ends, the client gives up instead.
	if retry && e.now+wait < r.deadline {
		if rt.Budget > 0 {
			e.retryTokens--
		}
		nid, nr := e.alloc()
		nr.attempt = r.attempt + 1
		nr.first, nr.deadline = r.first, r.deadline
		nr.clientOK = true // holds the client worker through the backoff
		e.schedule(e.now+wait, evRetry, nid, nr.gen)
	} else {
		e.clientBusy--
	}
	e.maybeFree(id, r)
}

func (e *engine) closeInterval() {
	p := e.m.tick(e.now)
	p.Limit = e.pol.limit()
	p.InFlight = e.inFlight
	p.Queued = e.pol.queued()
	p.OriginBusy = e.org.busy
	p.OriginQ = e.org.n
}
