package sim

// origin is the modeled service: workers, a bounded FIFO queue, a
// service-time distribution that may change during the run.
type origin struct {
	workers int
	busy    int
	bound   int   // queue bound; Unbounded: none
	tmo     int64 // the origin's timeout, 0: none
	svc     Sampler

	// q is a ring of queued requests. An entry whose request left the
	// queue early (the origin's timeout) is a tombstone, recognised by gen,
	// until trim drops it; live counts the others.
	q    []qent
	head int
	n    int
	live int
}

type qent struct {
	id  int32
	gen uint32
}

func newOrigin(o *Origin) origin {
	return origin{workers: o.Workers, bound: o.Queue, tmo: int64(o.Timeout), svc: NewSampler(o.Service), q: make([]qent, 16)}
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
	case o.bound == Unbounded || o.live < o.bound:
		o.push(qent{id, r.gen})
		r.oqueued = true
		o.live++
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
	for o.busy < o.workers && o.live > 0 {
		q := o.pop()
		r := e.req(q.id)
		if r.gen != q.gen || !r.oqueued {
			continue // a tombstone
		}
		r.oqueued = false
		o.live--
		o.serve(e, q.id, r)
	}
	if o.live == 0 {
		o.head, o.n = 0, 0 // drop the tombstones
	}
}

// timeout is the origin's own deadline for r: it answers with an error; a
// request still queued leaves the queue, one in service keeps its worker.
func (o *origin) timeout(e *engine, id int32, r *request) {
	if !r.holding {
		return // already answered
	}
	if r.oqueued {
		r.oqueued = false
		o.live--
		o.trim(e)
	} else {
		r.answered = true
	}
	e.answer(id, r, cOriginTimeout)
}

// trim drops the tombstones at the queue's head. Timeouts come in the
// order the requests were queued, so one that leaves the queue is at its
// head once those before it are dropped: the ring holds the requests
// waiting, not every one that ever timed out in it (which, behind a worker
// busy for long, grew it by each request the run sent).
func (o *origin) trim(e *engine) {
	for o.n > 0 {
		q := o.q[o.head]
		if r := e.req(q.id); r.gen == q.gen && r.oqueued {
			return
		}
		o.pop()
	}
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

func (o *origin) push(q qent) {
	if o.n == len(o.q) {
		grown := make([]qent, 2*len(o.q))
		for i := range o.n {
			grown[i] = o.q[(o.head+i)&(len(o.q)-1)]
		}
		o.q, o.head = grown, 0
	}
	o.q[(o.head+o.n)&(len(o.q)-1)] = q
	o.n++
}

func (o *origin) pop() qent {
	q := o.q[o.head]
	o.head = (o.head + 1) & (len(o.q) - 1)
	o.n--
	return q
}
