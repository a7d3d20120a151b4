package sim

// origin is the modeled service: workers, a bounded FIFO queue, a
// service-time distribution that may change during the run.
type origin struct {
	workers int
	busy    int
	bound   int   // queue bound; Unbounded: none
	tmo     int64 // the origin's timeout, 0: none
	svc     Sampler

	// q is a ring of the queued requests, n of them from head, oldest
	// first. A request leaves it at its head, to a worker or at the
	// origin's timeout: timeouts all have the same length and fire in the
	// order the requests were submitted, so one that fires for a queued
	// request finds it at the head.
	q    []int32 // request ids
	head int
	n    int
}

func newOrigin(o *Origin) origin {
	return origin{workers: o.Workers, bound: o.Queue, tmo: int64(o.Timeout), svc: NewSampler(o.Service), q: make([]int32, 16)}
}

// capacity is the completion rate the origin can sustain: workers over the
// mean service time, per second.
func (o *origin) capacity() float64 { return float64(o.workers) / (o.svc.meanActual / 1e9) }

// submit takes an admitted request: serve it, queue it or refuse it.
func (o *origin) submit(e *engine, id int32, r *request) {
	if o.tmo > 0 {
		e.scheduleFIFO(&e.otos, e.now+o.tmo, evOriginTimeout, id, r.gen)
	}
	switch {
	case o.busy < o.workers:
		o.serve(e, id, r)
	case o.bound == Unbounded || o.n < o.bound:
		o.push(id)
		r.oqueued = true
	default:
		// Refuse in an event of its own rather than now: the policy is
		// usually in the middle of handing out grants.
		e.schedule(e.now, evRefuse, id, r.gen)
	}
}

func (o *origin) serve(e *engine, id int32, r *request) {
	o.busy++
	e.m.served(e.now, e.now-r.sent)
	e.schedule(e.now+o.svc.draw(e.rngSvc), evComplete, id, r.gen)
}

func (o *origin) complete(e *engine, id int32, r *request) {
	o.busy--
	o.startQueued(e)
	e.answer(id, r, cCompleted)
}

// startQueued hands free workers to queued requests, oldest first.
func (o *origin) startQueued(e *engine) {
	for o.busy < o.workers && o.n > 0 {
		id := o.pop()
		r := e.req(id)
		r.oqueued = false
		o.serve(e, id, r)
	}
}

// timeout is the origin's own deadline for r, still unanswered (due): it
// answers with an error; a request still queued leaves the queue, one in
// service keeps its worker.
func (o *origin) timeout(e *engine, id int32, r *request) {
	if r.oqueued {
		r.oqueued = false
		o.pop() // r: timeouts fire in queue order
	} else {
		r.answered = true
	}
	e.answer(id, r, cOriginTimeout)
}

func (o *origin) change(e *engine, c *Change) {
	if c.Workers > 0 {
		o.workers = c.Workers
	}
	if c.Service.Kind != "" {
		o.svc = NewSampler(c.Service)
	}
	e.m.capacity(e.now, o.capacity())
	o.startQueued(e)
}

func (o *origin) push(id int32) {
	if o.n == len(o.q) {
		grown := make([]int32, 2*len(o.q))
		for i := range o.n {
			grown[i] = o.q[(o.head+i)&(len(o.q)-1)]
		}
		o.q, o.head = grown, 0
	}
	o.q[(o.head+o.n)&(len(o.q)-1)] = id
	o.n++
}

func (o *origin) pop() int32 {
	id := o.q[o.head]
	o.head = (o.head + 1) & (len(o.q) - 1)
	o.n--
	return id
}
