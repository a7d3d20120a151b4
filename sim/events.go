package sim

// evKind says what an event does when it fires.
type evKind uint8

const (
	evArrival       evKind = iota // the next open-loop arrival
	evBurst                       // request gen of burst number id
	evRetry                       // request id is sent again (a retry attempt)
	evDeadline                    // request id's client deadline
	evComplete                    // the origin finishes request id
	evOriginTimeout               // the origin's timeout for request id
	evRefuse                      // the origin refuses request id (queue full)
	evGrant                       // a token-bucket reservation for id is due
	evWake                        // the policy's timer
	evChange                      // origin change number id
	evTick                        // the end of an interval
	numKinds
)

// rank orders the events due at the same instant; ties within a rank fire
// in the order they were scheduled, which keeps runs deterministic.
//
//  0. The boundaries: an interval ends (what happens at t is counted in the
//     next one) and an origin change takes effect.
//  1. The client's side: a send (arrival, burst, retry) and a client's
//     deadline.
//  2. The origin's timeouts: a request whose timeout comes at the instant
//     a worker frees has timed out, and leaves the queue rather than take
//     the worker, as a request answered at its own timeout's instant is
//     timed out (its timeout was scheduled before its completion).
//  3. Everything else the system does in answer: completions, the
//     origin's refusals, a bucket's grant, the policy's timer.
//
// Ties come from constant service times and arrivals (seed 003: 2 s of work,
// a send every 200 ms). Putting the client first is what real sockets do
// in the limit of short network delays: a request admitted on arriving at
// t, with service time S, frees its slot at t + S plus the hop to the
// origin and the hop back, while a request due at t + S reaches the limiter
// after the client's hop alone, which both share. So a send due at the
// instant a slot frees finds it still taken; a client's deadline at the
// instant of its answer has passed before the answer reaches it.
var rank = [numKinds]uint8{
	evTick: 0, evChange: 0,
	evArrival: 1, evBurst: 1, evRetry: 1, evDeadline: 1,
	evOriginTimeout: 2, evComplete: 3, evRefuse: 3, evGrant: 3, evWake: 3,
}

// event is a value in the heap: no allocation per event. gen guards against
// a request slot reused since the event was scheduled.
type event struct {
	at   int64
	seq  uint64
	id   int32
	gen  uint32
	kind evKind
}

// eventHeap is a binary min-heap ordered by before.
type eventHeap []event

func (h eventHeap) less(i, j int) bool { return before(&h[i], &h[j]) }

// push adds ev. A full heap first drops the events keep refuses (see
// eventFIFO.push), and grows unless that emptied half of it.
func (h *eventHeap) push(ev event, keep func(*event) bool) {
	if len(*h) == cap(*h) {
		h.compact(keep)
		if s := *h; 2*len(s) >= cap(s) {
			*h = append(make(eventHeap, 0, max(2*cap(s), 64)), s...)
		}
	}
	*h = append(*h, ev)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	s.down(0)
	*h = s
	return top
}

// down moves event i down to its place below.
func (s eventHeap) down(i int) {
	n := len(s)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
}

// compact drops the events keep refuses and restores the heap order.
func (h *eventHeap) compact(keep func(*event) bool) {
	s := *h
	j := 0
	for i := range s {
		if keep(&s[i]) {
			s[j] = s[i]
			j++
		}
	}
	if j == len(s) {
		return
	}
	s = s[:j]
	for i := j/2 - 1; i >= 0; i-- {
		s.down(i)
	}
	*h = s
}

// eventFIFO holds events scheduled in non-decreasing time order, such as
// client deadlines (send time + a constant timeout): a ring buffer instead
// of the heap, O(1) per event, and it keeps the heap small.
type eventFIFO struct {
	buf  []event
	head int
	n    int
}

// push appends ev. A full ring first drops the events keep refuses (those
// with nothing left to do when they fire), and grows only when that
// emptied less than half of it: it holds about the events still to do,
// not every one scheduled within its span (the deadline of every request
// answered within a client timeout of an hour). Growing then keeps the
// scans to O(1) per push.
func (f *eventFIFO) push(ev event, keep func(*event) bool) {
	if f.n == len(f.buf) {
		f.compact(keep)
		if 2*f.n >= len(f.buf) {
			grown := make([]event, max(2*len(f.buf), 64))
			for i := range f.n {
				grown[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
			}
			f.buf, f.head = grown, 0
		}
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = ev
	f.n++
}

// compact drops the events keep refuses, keeping the others' order.
func (f *eventFIFO) compact(keep func(*event) bool) {
	mask := len(f.buf) - 1
	j := 0
	for i := range f.n {
		if ev := &f.buf[(f.head+i)&mask]; keep(ev) {
			f.buf[(f.head+j)&mask] = *ev
			j++
		}
	}
	f.n = j
}

func (f *eventFIFO) peek() *event { return &f.buf[f.head] }

func (f *eventFIFO) pop() event {
	ev := f.buf[f.head]
	f.head = (f.head + 1) & (len(f.buf) - 1)
	f.n--
	return ev
}

// before reports whether a fires before b: by time, then rank, then the
// order they were scheduled in.
func before(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if ra, rb := rank[a.kind], rank[b.kind]; ra != rb {
		return ra < rb
	}
	return a.seq < b.seq
}
