package sim

// evKind says what an event does when it fires.
type evKind uint8

const (
	evArrival       evKind = iota // the next open-loop arrival
	evBurst                       // a burst of arrivals; id is the burst's index
	evRetry                       // request id is sent again (a retry attempt)
	evDeadline                    // request id's client deadline
	evComplete                    // the origin finishes request id
	evOriginTimeout               // the origin's timeout for request id
	evRefuse                      // the origin refuses request id (queue full)
	evGrant                       // a token-bucket reservation for id is due
	evWake                        // the policy's timer
	evChange                      // origin change number id
	evTick                        // the end of an interval
)

// event is a value in the heap: no allocation per event. gen guards against
// a request slot reused since the event was scheduled.
type event struct {
	at   int64
	seq  uint64
	id   int32
	gen  uint32
	kind evKind
}

// eventHeap is a binary min-heap ordered by (at, seq): ties fire in the
// order they were scheduled, which keeps runs deterministic.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(ev event) {
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
	i := 0
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
	*h = s
	return top
}

// eventFIFO holds events scheduled in non-decreasing time order, such as
// client deadlines (send time + a constant timeout): a ring buffer instead
// of the heap, O(1) per event, and it keeps the heap small.
type eventFIFO struct {
	buf  []event
	head int
	n    int
}

func (f *eventFIFO) push(ev event) {
	if f.n == len(f.buf) {
		grown := make([]event, max(2*len(f.buf), 64))
		for i := range f.n {
			grown[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
		}
		f.buf, f.head = grown, 0
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = ev
	f.n++
}

func (f *eventFIFO) peek() *event { return &f.buf[f.head] }

func (f *eventFIFO) pop() event {
	ev := f.buf[f.head]
	f.head = (f.head + 1) & (len(f.buf) - 1)
	f.n--
	return ev
}

// before reports whether a fires before b.
func before(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
