// Package waitrule holds the two rules every waiting limiter shares, so
// that rate.Bucket, keyed.Buckets, the byte shapers, the client's retries
// and the simulator apply them the same way:
//
//   - Bound and Clamp: how long a caller may wait for admission, and the
//     reason it is rejected with when its turn would come later (the
//     deadline/max-wait rule). Pure: the time is an argument.
//   - Sleep: the timer select at the edge, a wait that ends early when the
//     context is done.
package waitrule

import (
	"context"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/gcra"
)

// NoDeadline, passed as a deadline, means the caller has none.
const NoDeadline = math.MaxInt64

// Unbounded is the limit of a wait bounded by nothing.
const Unbounded = time.Duration(math.MaxInt64)

// Bound returns the longest a caller deciding at now (nanoseconds on any
// clock) may wait for admission, and why one whose turn comes later is
// rejected: sluice.ReasonQueueTimeout past maxWait (when maxWait > 0),
// sluice.ReasonDeadline past its deadline (on the same clock; NoDeadline
// for none) when that comes first, and sluice.ReasonRate when nothing
// bounds the wait (only a turn that never comes is rejected then).
func Bound(now, deadline int64, maxWait time.Duration) (limit time.Duration, why sluice.Reason) {
	limit, why = MaxWait(maxWait)
	return Clamp(limit, why, now, deadline)
}

// MaxWait is Bound without a deadline: maxWait and sluice.ReasonQueueTimeout
// when maxWait > 0, else Unbounded and sluice.ReasonRate.
func MaxWait(maxWait time.Duration) (limit time.Duration, why sluice.Reason) {
	if maxWait > 0 {
		return maxWait, sluice.ReasonQueueTimeout
	}
	return Unbounded, sluice.ReasonRate
}

// Clamp bounds a wait of at most limit (why: the reason past it) by the
// deadline, as Bound does. A turn must come strictly before the deadline:
// at the deadline itself the caller's context is already done.
func Clamp(limit time.Duration, why sluice.Reason, now, deadline int64) (time.Duration, sluice.Reason) {
	if deadline == NoDeadline {
		return limit, why
	}
	if deadline <= now {
		return 0, sluice.ReasonDeadline
	}
	if rem := time.Duration(gcra.SatSub(deadline, now)) - 1; rem < limit {
		return rem, sluice.ReasonDeadline
	}
	return limit, why
}

// Deadline returns ctx's deadline in nanoseconds on the clock of toNanos,
// or NoDeadline.
func Deadline(ctx context.Context, toNanos func(time.Time) int64) int64 {
	if dl, ok := ctx.Deadline(); ok {
		return min(toNanos(dl), NoDeadline-1)
	}
	return NoDeadline
}

// Sleep waits d, or until ctx is done, whichever comes first: it returns
// nil after d, ctx.Err() if ctx ended the wait. For d <= 0 it returns
// ctx.Err() at once. It holds no lock and one timer, stopped on return.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
