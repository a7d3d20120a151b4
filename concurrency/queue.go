package concurrency

import "github.com/sluicehq/sluice"

// WaiterID identifies a queued waiter of a Core. IDs are never reused while
// the Core lives (a slot's generation changes each time it is freed), so a
// stale ID is harmless: Remove reports false. The zero WaiterID is never
// issued.
type WaiterID uint64

func makeID(gen uint32, idx int32) WaiterID { return WaiterID(uint64(gen)<<32 | uint64(uint32(idx))) }

// index is the waiter's slot in the Core's node table, below 2^31; the
// Limiter uses it to index its own per-waiter table.
func (w WaiterID) index() int32 { return int32(uint32(w)) }
func (w WaiterID) gen() uint32  { return uint32(w >> 32) }

const none int32 = -1

// node is one queued waiter. Nodes live in a table and link by index, so a
// queue of any length allocates only when the table grows past its peak.
type node struct {
	gen        uint32
	queued     bool
	expReason  sluice.Reason
	prev, next int32
	enq        int64 // enqueue time, ns
	expiry     int64 // when the wait bound rejects it, ns; noDeadline if never
	deadline   int64 // the caller's deadline, ns; noDeadline if none
}

// queue is a doubly linked list over a node table, kept in arrival order:
// FIFO takes the head, LIFO the tail. Because each waiter's expiry is a
// non-decreasing function of its arrival time (see Core.expiryFor), the head
// always expires first, so expiry is a scan from the head.
type queue struct {
	nodes      []node
	free       int32 // head of the free list, linked through next
	head, tail int32
	n          int
	// deadlined counts queued nodes with a deadline: while it is 0 (and
	// the config has no wait bound), a release needs no clock reading.
	deadlined int
}

func (q *queue) init() { q.free, q.head, q.tail = none, none, none }

func (q *queue) push(enq, expiry, deadline int64, reason sluice.Reason) WaiterID {
	i := q.free
	if i == none {
		q.nodes = append(q.nodes, node{gen: 1})
		i = int32(len(q.nodes) - 1)
	} else {
		q.free = q.nodes[i].next
	}
	nd := &q.nodes[i]
	nd.queued, nd.enq, nd.expiry, nd.deadline, nd.expReason = true, enq, expiry, deadline, reason
	nd.prev, nd.next = q.tail, none
	if q.tail == none {
		q.head = i
	} else {
		q.nodes[q.tail].next = i
	}
	q.tail = i
	q.n++
	if deadline != noDeadline {
		q.deadlined++
	}
	return makeID(nd.gen, i)
}

// lookup returns the index of w if w is queued, or none.
func (q *queue) lookup(w WaiterID) int32 {
	i := w.index()
	if i < 0 || int(i) >= len(q.nodes) || q.nodes[i].gen != w.gen() || !q.nodes[i].queued {
		return none
	}
	return i
}

// remove unlinks node i, frees its slot and returns its former ID.
func (q *queue) remove(i int32) WaiterID {
	nd := &q.nodes[i]
	if nd.prev == none {
		q.head = nd.next
	} else {
		q.nodes[nd.prev].next = nd.next
	}
	if nd.next == none {
		q.tail = nd.prev
	} else {
		q.nodes[nd.next].prev = nd.prev
	}
	id := makeID(nd.gen, i)
	nd.gen++
	if nd.gen == 0 {
		nd.gen = 1
	}
	nd.queued = false
	if nd.deadline != noDeadline {
		q.deadlined--
	}
	nd.next = q.free
	q.free = i
	q.n--
	return id
}
