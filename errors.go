package sluice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Reason says why a limiter rejected work.
type Reason uint8

// The reasons a limiter rejects work. Each has a sentinel error, named after
// it, that a *RejectError with that reason matches under errors.Is.
const (
	ReasonUnknown      Reason = iota
	ReasonRate                // a rate limit: no tokens now
	ReasonLimit               // a concurrency limit: no free slot and no queue to wait in
	ReasonQueueFull           // the wait queue is at its maximum length
	ReasonQueueTimeout        // the wait would reach (or reached) its maximum
	ReasonDeadline            // the caller's deadline would pass before admission
	ReasonShed                // shed by the queue discipline (CoDel: a standing queue)
	ReasonThrottled           // client-side adaptive throttling rejected locally
	ReasonTooLarge            // the request can never be admitted (n tokens > burst)
	ReasonStore               // a shared limiter's store (Redis) did not answer and its policy is to fail closed
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
	ReasonTooLarge:     "too_large",
	ReasonStore:        "store",
}

// String returns the reason as a short snake_case label, suitable for a
// metrics label value.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Sentinel errors. Every rejection matches ErrRejected, the sentinel named
// after its reason (ReasonQueueFull: ErrQueueFull), and exactly one of
// ErrQuota and ErrCapacity:
//
//	if errors.Is(err, sluice.ErrQuota) { ... } // "was this a rate limit?": answer 429
var (
	ErrRejected     = errors.New("sluice: rejected")
	ErrRate         = errors.New("sluice: rate limited")
	ErrLimit        = errors.New("sluice: concurrency limit reached")
	ErrQueueFull    = errors.New("sluice: queue full")
	ErrQueueTimeout = errors.New("sluice: queue wait exceeded")
	ErrDeadline     = errors.New("sluice: deadline cannot be met")
	ErrShed         = errors.New("sluice: shed by queue discipline")
	ErrThrottled    = errors.New("sluice: throttled by client")
	ErrTooLarge     = errors.New("sluice: request exceeds limiter capacity")
	// ErrStore: a limiter that shares its state through a store (Redis)
	// could not reach it and fails closed. A capacity rejection (503):
	// the caller is not over its quota, the limiter cannot tell.
	ErrStore = errors.New("sluice: store unavailable")

	// ErrQuota is matched by every rejection from a rate limit, whatever
	// its reason (no tokens, tokens that would come after the deadline or
	// the maximum wait): the caller sent more than its quota. HTTP 429.
	ErrQuota = errors.New("sluice: over quota")
	// ErrCapacity is matched by every other rejection: the service is at
	// its capacity, whoever the caller is. HTTP 503.
	ErrCapacity = errors.New("sluice: at capacity")
)

var reasonErrs = [NumReasons]error{
	ReasonUnknown:      ErrRejected,
	ReasonRate:         ErrRate,
	ReasonLimit:        ErrLimit,
	ReasonQueueFull:    ErrQueueFull,
	ReasonQueueTimeout: ErrQueueTimeout,
	ReasonDeadline:     ErrDeadline,
	ReasonShed:         ErrShed,
	ReasonThrottled:    ErrThrottled,
	ReasonTooLarge:     ErrTooLarge,
	ReasonStore:        ErrStore,
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
	// Quota is true when a rate limit rejected the work: the caller sent
	// more than its quota (HTTP 429), whatever the reason — a token bucket
	// whose tokens would come after the caller's deadline rejects with
	// ReasonDeadline and Quota set. False when the service is at capacity
	// (HTTP 503). errors.Is(err, ErrQuota) reads it through any wrapping.
	Quota bool
}

// Reject returns a *RejectError for a capacity rejection (HTTP 503); a
// convenience for limiter implementations. Without a retry-after hint it
// returns one shared error per reason, so the rejection path does not
// allocate: a *RejectError must never be modified.
func Reject(r Reason, retryAfter time.Duration) error {
	return reject(r, retryAfter, false)
}

// RejectQuota is Reject for rate limits: the error's Quota field is set and
// it matches ErrQuota (HTTP 429).
func RejectQuota(r Reason, retryAfter time.Duration) error {
	return reject(r, retryAfter, true)
}

func reject(r Reason, retryAfter time.Duration, quota bool) error {
	retryAfter = max(retryAfter, 0) // a time already past is no hint
	if retryAfter == 0 && int(r) < NumReasons {
		k := 0
		if quota {
			k = 1
		}
		return &sharedRejects[k][r]
	}
	return &RejectError{Reason: r, RetryAfter: retryAfter, Quota: quota}
}

// sharedRejects holds one error per reason, for capacity [0] and quota [1].
var sharedRejects = func() (a [2][NumReasons]RejectError) {
	for i := range a[0] {
		a[0][i] = RejectError{Reason: Reason(i)}
		a[1][i] = RejectError{Reason: Reason(i), Quota: true}
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

// Is matches ErrRejected, the sentinel of e.Reason, ErrQuota or ErrCapacity
// as e.Quota says, and, for ReasonDeadline, context.DeadlineExceeded.
func (e *RejectError) Is(target error) bool {
	switch target {
	case ErrRejected, e.Reason.Err():
		return true
	case ErrQuota:
		return e.Quota
	case ErrCapacity:
		return !e.Quota
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
	r, _ := reasonOf(err)
	return r
}

// reasonOf is ReasonOf that also says whether err is a rejection at all.
func reasonOf(err error) (Reason, bool) {
	if re, ok := err.(*RejectError); ok {
		return re.Reason, true // unwrapped: no errors.As, no allocation
	}
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason, true
	}
	return ReasonUnknown, false
}

// ErrInvalidConfig is matched by every *ConfigError, so one errors.Is tells
// a configuration mistake from anything else.
var ErrInvalidConfig = errors.New("sluice: invalid config")

// ConfigError is the error every constructor and setter in sluice returns
// for a bad configuration value. It names the package, the field and the
// value, and says what is allowed; it matches ErrInvalidConfig.
//
//	sluice/rate: Config.Rate = -5: must be >= 0 (or +Inf for no limit)
type ConfigError struct {
	Package string // the package, "rate"
	Field   string // the field or argument, "Config.Rate" or "SetLimit(n)"
	Value   any    // the value given; nil when the problem is a missing value
	Allowed string // what is allowed, "must be >= 0"
}

// NewConfigError returns a *ConfigError; a convenience for implementations.
func NewConfigError(pkg, field string, value any, allowed string) error {
	return &ConfigError{Package: pkg, Field: field, Value: value, Allowed: allowed}
}

func (e *ConfigError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("sluice/%s: %s: %s", e.Package, e.Field, e.Allowed)
	}
	return fmt.Sprintf("sluice/%s: %s = %v: %s", e.Package, e.Field, e.Value, e.Allowed)
}

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
