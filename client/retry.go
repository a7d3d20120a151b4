package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/waitrule"
)

// RetryPolicy configures a Retrier. The zero value makes 3 attempts per
// request, waits with full jitter from 100 ms doubling up to 10 s, and keeps
// retries within a private RetryBudget's default 10% of requests.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts per request, the first
	// included; 1 disables retries. Default 3, the SRE book's figure: more
	// multiplies load exactly when the backend is least able to take it.
	// At most 100.
	MaxAttempts int
	// BaseDelay bounds the wait before the first retry; the bound doubles
	// with each retry. Default 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps every wait, a server's Retry-After included: when a
	// server asks for a longer wait than this, the request is not retried
	// (retrying sooner than asked would only add load). Default 10 s.
	// Must be >= BaseDelay.
	MaxDelay time.Duration
	// Budget caps retries across requests. Share one among the clients of a
	// backend; make it with NewRetryBudget. Default: a private budget with
	// the zero RetryBudgetConfig.
	Budget *RetryBudget
	// Random returns a uniform number in [0, 1) for the jitter. It must be
	// safe for concurrent use. Default math/rand/v2.Float64.
	Random func() float64
}

const maxAttempts = 100

func (p *RetryPolicy) fill() error {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = max(10*time.Second, p.BaseDelay)
	}
	if p.Random == nil {
		p.Random = rand.Float64
	}
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > maxAttempts:
		return invalid("RetryPolicy.MaxAttempts", p.MaxAttempts, "must be in [1, "+strconv.Itoa(maxAttempts)+"]")
	case p.BaseDelay < 0:
		return invalid("RetryPolicy.BaseDelay", p.BaseDelay, "must be >= 0")
	case p.MaxDelay < p.BaseDelay:
		return invalid("RetryPolicy.MaxDelay", p.MaxDelay, "must be >= BaseDelay ("+p.BaseDelay.String()+")")
	case p.Budget != nil && p.Budget.w.width == 0:
		return invalid("RetryPolicy.Budget", nil, "must be made by NewRetryBudget (a zero RetryBudget is not usable)")
	}
	if p.Budget == nil {
		p.Budget, _ = NewRetryBudget(RetryBudgetConfig{}) // the defaults are valid
	}
	return nil
}

// Decision says whether a failed attempt is retried, and if not, why.
type Decision uint8

const (
	Retry          Decision = iota // retry after the wait
	NoAttemptsLeft                 // MaxAttempts reached
	HintTooLong                    // the server asked to wait longer than MaxDelay
	PastDeadline                   // the wait would outlast the context's deadline
	NoBudget                       // the retry budget is spent
)

var decisionNames = [...]string{"retry", "no_attempts_left", "hint_too_long", "past_deadline", "no_budget"}

func (d Decision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return "decision(" + strconv.Itoa(int(d)) + ")"
}

// Backoff returns the full-jitter wait before retry number retry (1 for the
// first retry) for a uniform draw u in [0, 1): u·min(maxDelay,
// base·2^(retry−1)), counted from the server's hint when there is one, and
// capped at maxDelay. ok is false when the hint is longer than maxDelay.
//
// The jitter comes after the hint, not instead of it: every client a
// server sheds at once is told the same Retry-After (a rate limit's next
// token, an overloaded backend's guess), and clients that all waited
// exactly that long would come back together, the herd the hint was meant
// to spread.
func Backoff(base, maxDelay time.Duration, retry int, hint time.Duration, u float64) (wait time.Duration, ok bool) {
	if hint > maxDelay {
		return 0, false
	}
	ceil := maxDelay
	if shift := retry - 1; shift < 62 && base <= maxDelay>>max(shift, 0) {
		ceil = base << max(shift, 0)
	}
	wait = time.Duration(u * float64(ceil))
	// hint + wait, capped at maxDelay, without the sum: near the largest
	// Duration it wraps negative, a retry sent at once past the hint.
	hint = max(hint, 0)
	return hint + min(wait, maxDelay-hint), true
}

// RetryStats counts a Retrier's work since it was created.
type RetryStats struct {
	Requests     uint64 // requests started (Do calls, RoundTrips)
	Retries      uint64 // attempts after the first
	BudgetDenied uint64 // retries the budget refused
}

// Retrier retries failed work with capped exponential backoff and full
// jitter, honouring a server's Retry-After and a retry budget. Safe for
// concurrent use.
type Retrier struct {
	p RetryPolicy

	requests, retries, denied atomic.Uint64
}

// NewRetrier returns a Retrier, or a *sluice.ConfigError that
// names the bad field.
func NewRetrier(p RetryPolicy) (*Retrier, error) {
	if err := p.fill(); err != nil {
		return nil, err
	}
	return &Retrier{p: p}, nil
}

// Policy returns the policy with its defaults filled in.
func (r *Retrier) Policy() RetryPolicy { return r.p }

// Stats returns the counters.
func (r *Retrier) Stats() RetryStats {
	return RetryStats{Requests: r.requests.Load(), Retries: r.retries.Load(), BudgetDenied: r.denied.Load()}
}

// BeginAt counts a new request at time now, in the counters and the budget.
// Do and Transport call it; the simulator calls it directly.
func (r *Retrier) BeginAt(now time.Time) { r.beginAt(clock.FromTime(now)) }

func (r *Retrier) beginAt(now int64) {
	r.requests.Add(1)
	r.p.Budget.requestAt(now)
}

// NextAt decides, at time now and after `attempts` failed attempts, whether
// to retry and how long to wait first. hint is the server's Retry-After (0 if
// none); deadline is the context's deadline (the zero Time if none). The
// budget is charged only when the answer is Retry.
func (r *Retrier) NextAt(now time.Time, attempts int, hint time.Duration, deadline time.Time) (time.Duration, Decision) {
	dl := int64(0)
	if !deadline.IsZero() {
		dl = clock.FromTime(deadline)
	}
	return r.nextAt(clock.FromTime(now), attempts, hint, dl, !deadline.IsZero())
}

func (r *Retrier) nextAt(now int64, attempts int, hint time.Duration, deadline int64, hasDeadline bool) (time.Duration, Decision) {
	if attempts >= r.p.MaxAttempts {
		return 0, NoAttemptsLeft
	}
	wait, ok := Backoff(r.p.BaseDelay, r.p.MaxDelay, attempts, hint, r.p.Random())
	if !ok {
		return 0, HintTooLong
	}
	// deadline-now rather than now+wait: a MaxDelay near the largest
	// Duration would overflow the sum and sleep past the deadline.
	// deadline <= now first: a deadline centuries ago saturates at the
	// smallest int64, and deadline-now would overflow to a large positive.
	if hasDeadline && (deadline <= now || int64(wait) >= deadline-now) {
		return 0, PastDeadline // fail now rather than sleep into a certain timeout
	}
	if !r.p.Budget.tryRetryAt(now) {
		r.denied.Add(1)
		return 0, NoBudget
	}
	r.retries.Add(1)
	return wait, Retry
}

// nextCtx is nextAt now with ctx's deadline; it also returns the time it
// decided at, the one refundAt takes.
func (r *Retrier) nextCtx(ctx context.Context, attempts int, hint time.Duration) (time.Duration, Decision, int64) {
	dl, ok := ctx.Deadline()
	now := clock.Nanos()
	wait, d := r.nextAt(now, attempts, hint, clock.FromTime(dl), ok)
	return wait, d, now
}

// wait sleeps a retry's backoff, decided at time at; if ctx ends first,
// the retry is never made, and the budget gets it back.
func (r *Retrier) wait(ctx context.Context, d time.Duration, at int64) error {
	err := waitrule.Sleep(ctx, d)
	if err != nil {
		r.refundAt(at)
	}
	return err
}

// refundAt undoes a Retry decided at time at whose retry was never sent
// (the caller left during the wait, or a Transport's limiter rejected it):
// the budget gets its retry back and Stats stops counting it.
func (r *Retrier) refundAt(at int64) {
	r.retries.Add(^uint64(0)) // minus one
	r.p.Budget.refundAt(at)
}

// Do calls fn until it returns nil, an error not worth retrying, the policy
// says stop, or ctx is done; it returns fn's last error. An error is retried
// unless it is wrapped by Permanent, is ctx's own error, is a sluice
// rejection that cannot succeed on a retry (local throttling, an unreachable
// deadline, a request too large), or is an HTTP error that every retry would
// meet again, the ones Transport returns at once (an invalid URL or request,
// an untrusted TLS certificate, a server that does not speak TLS); such an
// error is returned at once, as fn returned it. A *sluice.RejectError's
// RetryAfter is honoured as the server's hint.
//
// If ctx ends during a wait, or during an attempt that fails with an error
// worth retrying, Do returns an error matching both ctx.Err() and fn's last
// error; a retry it was waiting for was never made, and costs the budget
// nothing.
func (r *Retrier) Do(ctx context.Context, fn func(context.Context) error) error {
	r.beginAt(clock.Nanos())
	for attempts := 1; ; attempts++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !retryable(ctx, err) {
			return unwrapPermanent(err)
		}
		if cerr := ctx.Err(); cerr != nil {
			// The caller has left and no retry will be sent: deciding one
			// took it from the budget, which other requests share, and
			// counted it in Stats.
			return fmt.Errorf("%w (last attempt: %w)", cerr, err)
		}
		hint, _ := sluice.RetryAfter(err)
		wait, d, at := r.nextCtx(ctx, attempts, hint)
		if d != Retry {
			return err
		}
		if cerr := r.wait(ctx, wait, at); cerr != nil {
			return fmt.Errorf("%w (last attempt: %w)", cerr, err)
		}
	}
}

func retryable(ctx context.Context, err error) bool {
	var pe *permanentError
	if errors.As(err, &pe) || cannotSucceed(err) {
		return false
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return false
	}
	switch sluice.ReasonOf(err) {
	case sluice.ReasonThrottled, sluice.ReasonDeadline, sluice.ReasonTooLarge:
		return false
	}
	return true
}

// Permanent marks err as not worth retrying: Do returns err at once.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

func unwrapPermanent(err error) error {
	if pe, ok := err.(*permanentError); ok {
		return pe.err
	}
	return err
}
