package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestRejectErrorMatchesItsReason(t *testing.T) {
	for r := sluice.Reason(0); r < sluice.NumReasons; r++ {
		for _, c := range []struct {
			hint   time.Duration
			isRate bool
		}{{0, false}, {1500 * time.Millisecond, false}, {0, true}, {time.Second, true}} {
			hint := c.hint
			reject := sluice.Reject
			if c.isRate {
				reject = sluice.RejectQuota
			}
			err := fmt.Errorf("wrapped: %w", reject(r, hint))
			var re *sluice.RejectError
			if !errors.As(err, &re) || re.Quota != c.isRate {
				t.Errorf("%v: RejectError.Quota is not %v", r, c.isRate)
			}
			if !errors.Is(err, sluice.ErrRejected) || !errors.Is(err, r.Err()) {
				t.Errorf("%v (hint %v): does not match ErrRejected and %v", r, hint, r.Err())
			}
			for o := sluice.Reason(1); o < sluice.NumReasons; o++ {
				if o != r && errors.Is(err, o.Err()) {
					t.Errorf("%v matches the sentinel of %v", r, o)
				}
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != (r == sluice.ReasonDeadline) {
				t.Errorf("%v: errors.Is(DeadlineExceeded) = %v", r, got)
			}
			if got, ok := sluice.RetryAfter(err); !ok || got != hint {
				t.Errorf("%v: RetryAfter = %v, %v; want %v, true", r, got, ok, hint)
			}
			if sluice.ReasonOf(err) != r {
				t.Errorf("ReasonOf = %v, want %v", sluice.ReasonOf(err), r)
			}
		}
	}
	if _, ok := sluice.RetryAfter(errors.New("other")); ok {
		t.Error("RetryAfter reports a hint for a foreign error")
	}
	if sluice.ReasonOf(context.Canceled) != sluice.ReasonUnknown {
		t.Error("a cancelled context is not a rejection")
	}
}

func TestRejectWithoutHintDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = sluice.Reject(sluice.ReasonQueueFull, 0) }); n != 0 {
		t.Errorf("Reject without a hint allocates %v times", n)
	}
}

func TestReasonAndOutcomeNames(t *testing.T) {
	for r := sluice.Reason(0); r < sluice.NumReasons; r++ {
		if s := r.String(); s == "" || strings.HasPrefix(s, "reason(") {
			t.Errorf("reason %d has no name: %q", r, s)
		}
	}
	if got := sluice.Reason(200).String(); got != "reason(200)" {
		t.Errorf("unknown reason prints %q", got)
	}
	if got := sluice.Outcome(9).String(); got != "outcome(9)" {
		t.Errorf("unknown outcome prints %q", got)
	}
}

func TestPermitReleasesOnce(t *testing.T) {
	var calls int
	p := sluice.NewPermit(releaserFunc(func(uint64, sluice.Outcome, time.Duration) { calls++ }), 7)
	if !p.Held() {
		t.Fatal("a new permit is not held")
	}
	p.Release(sluice.Success, time.Millisecond)
	p.Release(sluice.Success, time.Millisecond)
	p.Cancel()
	if calls != 1 || p.Held() {
		t.Fatalf("released %d times, held %v; want once, not held", calls, p.Held())
	}
	var zero sluice.Permit
	zero.Release(sluice.Dropped, 0) // must not panic
	zero.Cancel()

	var cancels int
	q := sluice.NewPermit(releaserFunc(func(_ uint64, _ sluice.Outcome, d time.Duration) {
		if d == -1 {
			cancels++
		}
	}), 7)
	q.Cancel()
	q.Cancel()
	q.Release(sluice.Success, 0)
	if cancels != 1 || q.Held() {
		t.Fatalf("cancelled %d times, held %v; want once, not held", cancels, q.Held())
	}
}

// Every rejection is either over a quota (429) or at capacity (503), and
// errors.Is says which through any wrapping.
func TestQuotaOrCapacity(t *testing.T) {
	for r := sluice.Reason(0); r < sluice.NumReasons; r++ {
		q := fmt.Errorf("w: %w", sluice.RejectQuota(r, time.Second))
		c := fmt.Errorf("w: %w", sluice.Reject(r, 0))
		if !errors.Is(q, sluice.ErrQuota) || errors.Is(q, sluice.ErrCapacity) {
			t.Errorf("%v: a quota rejection does not match ErrQuota alone", r)
		}
		if errors.Is(c, sluice.ErrQuota) || !errors.Is(c, sluice.ErrCapacity) {
			t.Errorf("%v: a capacity rejection does not match ErrCapacity alone", r)
		}
	}
	if errors.Is(errors.New("x"), sluice.ErrQuota) || errors.Is(context.Canceled, sluice.ErrCapacity) {
		t.Error("a foreign error matches ErrQuota or ErrCapacity")
	}
}

func TestConfigError(t *testing.T) {
	err := fmt.Errorf("setup: %w", sluice.NewConfigError("rate", "Config.Rate", -5.0, "must be >= 0"))
	if !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatal("ConfigError does not match ErrInvalidConfig")
	}
	var ce *sluice.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Rate" || ce.Package != "rate" {
		t.Fatalf("errors.As: %+v", ce)
	}
	if got, want := err.Error(), "setup: sluice/rate: Config.Rate = -5: must be >= 0"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := sluice.NewConfigError("keyed", "Config.New", nil, "is required").Error(), "sluice/keyed: Config.New: is required"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

type releaserFunc func(uint64, sluice.Outcome, time.Duration)

func (f releaserFunc) Release(tok uint64, o sluice.Outcome, d time.Duration) { f(tok, o, d) }
func (f releaserFunc) Cancel(tok uint64)                                     { f(tok, sluice.Ignore, -1) }

func ExampleRejectError() {
	err := fmt.Errorf("GET /: %w", sluice.Reject(sluice.ReasonRate, 1500*time.Millisecond))
	retry, _ := sluice.RetryAfter(err)
	fmt.Println(errors.Is(err, sluice.ErrRate), sluice.ReasonOf(err), retry)
	fmt.Println(err)
	// Output:
	// true rate 1.5s
	// GET /: sluice: rate limited (retry after 1.5s)
}

// Reading a rejection's reason and hint is on every rejection path (the
// composition, the middleware); an unwrapped rejection costs no allocation.
func TestReasonOfDoesNotAllocate(t *testing.T) {
	err := sluice.Reject(sluice.ReasonShed, 0)
	n := testing.AllocsPerRun(100, func() {
		if sluice.ReasonOf(err) != sluice.ReasonShed {
			t.Fatal("wrong reason")
		}
		if _, ok := sluice.RetryAfter(err); !ok {
			t.Fatal("no hint")
		}
	})
	if n != 0 {
		t.Errorf("ReasonOf and RetryAfter allocate %v times", n)
	}
}

// A negative hint (a time already past) is no hint: RetryAfter is never
// negative, whatever the reason, known to this version or not.
func TestRejectNegativeHintIsZero(t *testing.T) {
	for _, r := range []sluice.Reason{sluice.ReasonRate, sluice.NumReasons + 3} {
		for _, reject := range []func(sluice.Reason, time.Duration) error{sluice.Reject, sluice.RejectQuota} {
			err := reject(r, -time.Second)
			if d, ok := sluice.RetryAfter(err); !ok || d != 0 {
				t.Errorf("%v: RetryAfter = %v, %v; want 0, true", r, d, ok)
			}
			if sluice.ReasonOf(err) != r {
				t.Errorf("ReasonOf = %v, want %v", sluice.ReasonOf(err), r)
			}
		}
	}
}
