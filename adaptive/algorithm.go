package adaptive

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Sample is what one finished request tells a limit algorithm.
type Sample struct {
	// Latency is how long the work took.
	Latency time.Duration
	// InFlight is the number of requests in flight when this one started,
	// itself included. Algorithms use it to tell a limit that was reached
	// from one that was not (no growth while the limit is not the constraint).
	InFlight int
	// Waiting is the number of requests waiting for a permit in the
	// limiter's queue when this one was released: more than 0 says the
	// limit held demand back (whether the service could have taken it is
	// for the algorithm to judge). 0 without a queue.
	Waiting int
	// Outcome is sluice.Success or sluice.Dropped; limiters never pass
	// Ignore or a cancelled permit to an algorithm.
	Outcome sluice.Outcome
}

// Algorithm computes a concurrency limit from samples. Implementations are
// pure state machines: they read no clock (now is an argument) and start no
// goroutine, so the simulator can run them in virtual time.
//
// Implementations are not safe for concurrent use; the limiter that owns one
// serializes its calls.
type Algorithm interface {
	// Observe feeds one sample taken at time now and returns the new limit.
	// now must not go back between calls (a monotonic clock's reading, as
	// time.Now gives): the algorithms' windows and waits count from it, and
	// a step back holds them for its length.
	Observe(now time.Time, s Sample) int
	// Limit returns the current limit.
	Limit() int
}
