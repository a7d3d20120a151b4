package sluice

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Reason says why a limiter rejected work.
type Reason uint8

// The reasons a limiter rejects work. Each has a sentinel error that a
// *RejectError with that reason matches under errors.Is.
const (
	ReasonUnknown      Reason = iota
	ReasonRate                // a rate limit: no tokens now
	ReasonLimit               // a concurrency limit: no free slot and no queue to wait in
	ReasonQueueFull           // the wait queue is at its maximum length
	ReasonQueueTimeout        // the wait in the queue reached its maximum
	ReasonDeadline            // the caller's deadline would pass before admission
	ReasonShed                // shed by the queue discipline (CoDel: a standing queue)
	ReasonThrottled           // client-side adaptive throttling rejected locally
	ReasonStore               // a shared store (Redis) was unavailable and the policy is to fail closed
	ReasonTooLarge            // the request can never be admitted (n tokens > burst)
	ReasonClosed              // the limiter was closed
	NumReasons         = iota // the number of reasons, for arrays indexed by Reason
)

var reasonNames = [NumReasons]string{
	ReasonUnknown:      "unknown",
	ReasonRate:         "rate",
	ReasonLimit:        "limit",
	ReasonQueueFull:    "queue_full",
	ReasonQueueTimeout: "queue_timeout",
	ReasonDeadline:     "deadline",
	ReasonShed:         "shed",
	ReasonThrottled:    "throttled",
	ReasonStore:        "store",
	ReasonTooLarge:     "too_large",
	ReasonClosed:       "closed",
}

// String returns the reason as a short snake_case label, suitable for a
// metrics label value.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Sentinel errors. Every rejection matches ErrRejected and the sentinel of
// its reason:
//
//	if errors.Is(err, sluice.ErrQueueFull) { ... }
var (
	ErrRejected     = errors.New("sluice: rejected")
	ErrRateLimited  = errors.New("sluice: rate limited")
	ErrLimited      = errors.New("sluice: concurrency limit reached")
	ErrQueueFull    = errors.New("sluice: queue full")
	ErrQueueTimeout = errors.New("sluice: queue wait exceeded")
	ErrDeadline     = errors.New("sluice: deadline cannot be met")
	ErrShed         = errors.New("sluice: shed by queue discipline")
	ErrThrottled    = errors.New("sluice: throttled by client")
	ErrStore        = errors.New("sluice: store unavailable")
	ErrTooLarge     = errors.New("sluice: request exceeds limiter capacity")
	ErrClosed       = errors.New("sluice: limiter closed")
)

// ErrInvalidConfig is wrapped by every constructor's validation error in
// sluice and its sub-packages, so one errors.Is tells a configuration
// mistake from anything else. The error text names the field.
var ErrInvalidConfig = errors.New("sluice: invalid config")

var reasonErrs = [NumReasons]error{
	ReasonUnknown:      ErrRejected,
	ReasonRate:         ErrRateLimited,
	ReasonLimit:        ErrLimited,
	ReasonQueueFull:    ErrQueueFull,
	ReasonQueueTimeout: ErrQueueTimeout,
	ReasonDeadline:     ErrDeadline,
	ReasonShed:         ErrShed,
	ReasonThrottled:    ErrThrottled,
	ReasonStore:        ErrStore,
	ReasonTooLarge:     ErrTooLarge,
	ReasonClosed:       ErrClosed,
}

// Err returns the sentinel error for r.
func (r Reason) Err() error {
	if int(r) < len(reasonErrs) {
		return reasonErrs[r]
	}
	return ErrRejected
}

// RejectError is the error a limiter returns when it rejects work.
//
// RetryAfter is a hint: the earliest time from the rejection at which a retry
// could be admitted, or 0 when the limiter cannot tell. Use errors.As to read
// it, errors.Is to test the reason.
//
// A ReasonDeadline rejection also matches context.DeadlineExceeded: the
// caller's deadline is the cause, even though it has not passed yet (the
// limiter failed fast instead of waiting for it).
type RejectError struct {
	Reason     Reason
	RetryAfter time.Duration
	// Rate is true when a rate limit rejected the work (the caller sent too
	// much: HTTP 429) and false when capacity did (the service is busy: HTTP
	// 503), whatever the reason: a token bucket whose tokens would come
	// after the caller's deadline rejects with ReasonDeadline and Rate set.
	Rate bool
}

// Reject returns a *RejectError; a convenience for limiter implementations.
// Without a retry-after hint it returns one shared error per reason, so the
// rejection path does not allocate: a *RejectError must never be modified.
func Reject(r Reason, retryAfter time.Duration) error {
	return reject(r, retryAfter, false)
}

// RejectRate is Reject for rate limiters: the error's Rate field is set.
func RejectRate(r Reason, retryAfter time.Duration) error {
	return reject(r, retryAfter, true)
}

func reject(r Reason, retryAfter time.Duration, isRate bool) error {
	if retryAfter <= 0 && int(r) < NumReasons {
		k := 0
		if isRate {
			k = 1
		}
		return &sharedRejects[k][r]
	}
	return &RejectError{Reason: r, RetryAfter: retryAfter, Rate: isRate}
}

// sharedRejects holds one error per reason, for capacity [0] and rate [1].
var sharedRejects = func() (a [2][NumReasons]RejectError) {
	for i := range a[0] {
		a[0][i] = RejectError{Reason: Reason(i)}
		a[1][i] = RejectError{Reason: Reason(i), Rate: true}
	}
	return a
}()

func (e *RejectError) Error() string {
	s := e.Reason.Err().Error()
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	return s
}

// Is matches ErrRejected, the sentinel of e.Reason and, for ReasonDeadline,
// context.DeadlineExceeded.
func (e *RejectError) Is(target error) bool {
	switch target {
	case ErrRejected, e.Reason.Err():
		return true
	case context.DeadlineExceeded:
		return e.Reason == ReasonDeadline
	}
	return false
}

// RetryAfter returns the retry-after hint carried by err, if err is or wraps
// a *RejectError, and whether it was one.
func RetryAfter(err error) (time.Duration, bool) {
	if re, ok := err.(*RejectError); ok {
		return re.RetryAfter, true // unwrapped: no errors.As, no allocation
	}
	var re *RejectError
	if errors.As(err, &re) {
		return re.RetryAfter, true
	}
	return 0, false
}

// ReasonOf returns the reason carried by err, or ReasonUnknown if err is not a
// rejection.
func ReasonOf(err error) Reason {
	if re, ok := err.(*RejectError); ok {
		return re.Reason // unwrapped: no errors.As, no allocation
	}
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ReasonUnknown
}
