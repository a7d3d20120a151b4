// Package concurrency limits the work in flight: at most Limit permits are
// held at once, and callers beyond it wait in a bounded queue or are
// rejected at once.
//
// # The two layers
//
// [Core] is the decision state machine: limit, permits in flight, the queue
// and its discipline, with time passed in as an argument. It holds no
// goroutine and no lock; the simulator (package sim) runs it in virtual
// time. [Limiter] is the waiting layer over a Core: a mutex held only while
// deciding, a pooled channel per queued caller, one timer for the queue's
// head, the caller's context, and the real clock; nobody waits holding the
// lock. Its uncontended path (a permit free, nobody queued) is a single
// atomic add (a compare-and-swap close to the limit) that allocates nothing.
//
// # Queue disciplines
//
// FIFO serves the oldest waiter first; LIFO the newest (under overload the
// newest is the most likely to meet its deadline). CoDel, after Facebook's
// "Fail at Scale", bounds the wait instead of the order: if the queue has not
// been empty within the last CoDelInterval (100 ms), a caller waits at most
// CoDelTarget (5 ms), otherwise at most CoDelInterval. AdaptiveLIFO is CoDel
// that serves FIFO while the queue drains and LIFO once a standing queue has
// formed. Every discipline is bounded by MaxQueue, MaxWait and MaxWaitServices
// (a wait of so many mean service times, for a limit whose service time
// is not known in advance, once the queue stands: CoDel's rule with an
// interval of four times the bound), and rejects at
// once a caller whose deadline is sooner than the wait it faces (see Core for
// the estimator); a waiter whose deadline is less than the mean time a permit
// is held away when a permit frees for it is passed over (ReasonDeadline):
// it would finish after its caller gave up. A full LIFO queue (and AdaptiveLIFO in its LIFO mode)
// rejects its oldest waiter to make room for the newcomer; FIFO and CoDel
// reject the newcomer.
//
// The CoDel rule is the article's, applied per waiter: a waiter may stay
// until max(arrival + target, queue non-empty since + interval). Folly's
// Codel differs (overloaded when the minimum queueing delay over an interval
// exceeds the target, then shed waits above twice the target); the
// article's rule needs no delay history and fixes every wait's bound at
// arrival.
//
// Under overload, AdaptiveLIFO (or CoDel) with a MaxQueue of a few times the
// limit keeps latency short and goodput high; FIFO with a wait bounded only
// by the caller's context turns sustained overload into zero goodput.
//
// # Adaptive limits
//
// With Config.Algorithm set (package adaptive: Little, recommended with a
// short LIFO queue whose wait MaxWaitServices bounds, as in
// Config{Algorithm: little, Discipline: LIFO, MaxQueue: 50,
// MaxWaitServices: 4}; Gradient2, AIMD, Vegas),
// every permit released with Success or Dropped feeds the algorithm a sample
// and its answer becomes the limit.
package concurrency
