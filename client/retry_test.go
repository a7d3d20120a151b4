package client

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name           string
		base, maxDelay time.Duration
		retry          int
		hint           time.Duration
		u              float64
		want           time.Duration
		ok             bool
	}{
		{"first retry, mid draw", 100 * ms, 10 * time.Second, 1, 0, 0.5, 50 * ms, true},
		{"bound doubles per retry", 100 * ms, 10 * time.Second, 3, 0, 0.5, 200 * ms, true},
		{"a zero draw waits not at all", 100 * ms, 10 * time.Second, 2, 0, 0, 0, true},
		{"bound capped by MaxDelay", 100 * ms, 10 * time.Second, 10, 0, 0.5, 5 * time.Second, true},
		{"huge retry number does not overflow", 100 * ms, 10 * time.Second, 1 << 30, 0, 0.5, 5 * time.Second, true},
		{"retry 0 is treated as the first", 100 * ms, 10 * time.Second, 0, 0, 1, 100 * ms, true},
		{"the jitter comes after a hint", 100 * ms, 10 * time.Second, 1, 2 * time.Second, 0.5, 2050 * ms, true},
		{"a zero draw waits the hint exactly", 100 * ms, 10 * time.Second, 1, 2 * time.Second, 0, 2 * time.Second, true},
		{"after a hint, the jitter's bound doubles per retry too", 100 * ms, 10 * time.Second, 7, time.Second, 0.5, 4200 * ms, true},
		{"hint and jitter capped by MaxDelay", 100 * ms, 10 * time.Second, 10, 9 * time.Second, 0.5, 10 * time.Second, true},
		{"hint equal to MaxDelay is honoured", 100 * ms, 10 * time.Second, 1, 10 * time.Second, 0.9, 10 * time.Second, true},
		{"hint beyond MaxDelay stops", 100 * ms, 10 * time.Second, 1, 11 * time.Second, 0, 0, false},
		{"zero base waits only for hints", 0, 10 * time.Second, 5, 3 * time.Second, 0.9, 3 * time.Second, true},
		{"negative hint is no hint", 100 * ms, 10 * time.Second, 1, -time.Second, 0.5, 50 * ms, true},
		// The default MaxDelay is the largest Duration: hint + jitter used
		// to wrap negative there, a retry sent at once past a 429's
		// Retry-After.
		{"hint and jitter near the largest Duration", time.Second, math.MaxInt64, 64, time.Hour, 0.9999999, math.MaxInt64, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Backoff(tt.base, tt.maxDelay, tt.retry, tt.hint, tt.u)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Backoff = (%v, %v), want (%v, %v)", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		v    string
		want time.Duration
		ok   bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero", "0", 0, true},
		{"spaces around", "  5 ", 5 * time.Second, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"at the cap", "86400", MaxRetryAfter, true},
		{"past the cap", "86401", MaxRetryAfter, true},
		{"beyond int64", "99999999999999999999999999999999", MaxRetryAfter, true},
		{"date ahead (IMF-fixdate)", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"date ahead (RFC 850)", "Sunday, 22-Nov-26 01:01:00 GMT", time.Minute, true},
		{"date ahead (asctime)", "Sun Nov 22 01:00:10 2026", 10 * time.Second, true},
		{"date in the past", "Wed, 21 Oct 2015 07:28:00 GMT", 0, true},
		{"date far ahead", "Fri, 31 Dec 9999 23:59:59 GMT", MaxRetryAfter, true},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit suffix", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"malformed date", "Sun, 99 Foo 2026 25:61:00 GMT", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseRetryAfter(%q) = (%v, %v), want (%v, %v)", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-1", "1e9", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || d > MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = (%v, %v): out of bounds", v, d, ok)
		}
	})
}

func TestRetryBudgetConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   RetryBudgetConfig
		field string
	}{
		{"negative ratio", RetryBudgetConfig{Ratio: -0.1}, "Ratio"},
		{"huge ratio", RetryBudgetConfig{Ratio: 11}, "Ratio"},
		{"infinite floor", RetryBudgetConfig{MinPerSecond: math.Inf(1)}, "MinPerSecond"},
		{"negative window", RetryBudgetConfig{Window: -1}, "Window"},
		{"too many buckets", RetryBudgetConfig{Buckets: 5000}, "Buckets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRetryBudget(tt.cfg)
			if !errors.Is(err, sluice.ErrInvalidConfig) || !containsField(err, "RetryBudgetConfig."+tt.field) {
				t.Fatalf("err = %v, want sluice.ErrInvalidConfig naming RetryBudgetConfig.%s", err, tt.field)
			}
		})
	}
}

// TestRetryBudgetBoundsExtraLoad: when every request fails, retries stay
// within 10% of requests plus the floor, which is what keeps an outage from
// tripling the load.
func TestRetryBudgetBoundsExtraLoad(t *testing.T) {
	b, err := NewRetryBudget(RetryBudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	requests, retries := 0, 0
	for i := range 60 * 100 { // 100 requests per second for a minute, each wants 2 retries
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		b.RequestAt(at)
		requests++
		for range 2 {
			if b.TryRetryAt(at) {
				retries++
			}
		}
	}
	ratio := float64(retries) / float64(requests)
	t.Logf("%d requests, %d retries (%.3f)", requests, retries, ratio)
	// 10% of requests plus 1 retry per second.
	if max := 0.1 + 1.0/100; ratio > max+0.005 || ratio < 0.1 {
		t.Fatalf("retries/requests = %.3f, want within [0.1, %.3f]", ratio, max+0.005)
	}
}

func TestRetryBudgetFloor(t *testing.T) {
	t0 := time.Unix(0, 0)
	t.Run("default floor lets a quiet client retry", func(t *testing.T) {
		b, _ := NewRetryBudget(RetryBudgetConfig{})
		b.RequestAt(t0)
		for i := range 10 { // 1 per second over 10 s
			if !b.TryRetryAt(t0) {
				t.Fatalf("retry %d denied, want 10 allowed by the floor", i+1)
			}
		}
		if b.TryRetryAt(t0) {
			t.Fatal("11th retry allowed, want the floor spent")
		}
		if !b.TryRetryAt(t0.Add(11 * time.Second)) {
			t.Fatal("retry denied after the window slid, want the budget refilled")
		}
	})
	t.Run("no floor", func(t *testing.T) {
		b, _ := NewRetryBudget(RetryBudgetConfig{MinPerSecond: -1})
		for range 9 {
			b.RequestAt(t0)
		}
		if b.TryRetryAt(t0) {
			t.Fatal("retry allowed after 9 requests at 10%, want denied")
		}
		b.RequestAt(t0)
		if !b.TryRetryAt(t0) {
			t.Fatal("retry denied after 10 requests at 10%, want allowed")
		}
	})
}

func TestRetryPolicyErrors(t *testing.T) {
	tests := []struct {
		name  string
		p     RetryPolicy
		field string
	}{
		{"negative attempts", RetryPolicy{MaxAttempts: -1}, "MaxAttempts"},
		{"too many attempts", RetryPolicy{MaxAttempts: 101}, "MaxAttempts"},
		{"negative base", RetryPolicy{BaseDelay: -1}, "BaseDelay"},
		{"max below base", RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond}, "MaxDelay"},
		// Accepted, it divided by its zero bucket width at the first request.
		{"budget not from NewRetryBudget", RetryPolicy{Budget: &RetryBudget{}}, "Budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRetrier(tt.p)
			if !errors.Is(err, sluice.ErrInvalidConfig) || !containsField(err, "RetryPolicy."+tt.field) {
				t.Fatalf("err = %v, want sluice.ErrInvalidConfig naming RetryPolicy.%s", err, tt.field)
			}
		})
	}
	r, err := NewRetrier(RetryPolicy{BaseDelay: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Policy(); p.MaxAttempts != 3 || p.MaxDelay != 20*time.Second || p.Budget == nil {
		t.Fatalf("filled policy = %+v", p)
	}
}

func TestNextAt(t *testing.T) {
	t0 := time.Unix(0, 0)
	half := func() float64 { return 0.5 }
	tight, _ := NewRetryBudget(RetryBudgetConfig{MinPerSecond: -1}) // no requests, no floor: nothing to spend
	tests := []struct {
		name     string
		p        RetryPolicy
		attempts int
		hint     time.Duration
		deadline time.Time
		wait     time.Duration
		d        Decision
	}{
		{"first retry", RetryPolicy{}, 1, 0, time.Time{}, 50 * time.Millisecond, Retry},
		{"second retry", RetryPolicy{}, 2, 0, time.Time{}, 100 * time.Millisecond, Retry},
		{"attempts spent", RetryPolicy{}, 3, 0, time.Time{}, 0, NoAttemptsLeft},
		{"single attempt policy", RetryPolicy{MaxAttempts: 1}, 1, 0, time.Time{}, 0, NoAttemptsLeft},
		{"hint honoured, the jitter after it", RetryPolicy{}, 1, 3 * time.Second, time.Time{}, 3050 * time.Millisecond, Retry},
		{"hint too long", RetryPolicy{}, 1, time.Minute, time.Time{}, 0, HintTooLong},
		{"deadline after the wait", RetryPolicy{}, 1, time.Second, t0.Add(2 * time.Second), 1050 * time.Millisecond, Retry},
		{"deadline before the wait ends", RetryPolicy{}, 1, 3 * time.Second, t0.Add(2 * time.Second), 0, PastDeadline},
		{"budget spent", RetryPolicy{Budget: tight}, 1, 0, time.Time{}, 0, NoBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Random = half
			r, err := NewRetrier(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			r.BeginAt(t0)
			wait, d := r.NextAt(t0, tt.attempts, tt.hint, tt.deadline)
			if wait != tt.wait || d != tt.d {
				t.Fatalf("NextAt = (%v, %v), want (%v, %v)", wait, d, tt.wait, tt.d)
			}
			s := r.Stats()
			if (d == Retry) != (s.Retries == 1) || (d == NoBudget) != (s.BudgetDenied == 1) || s.Requests != 1 {
				t.Fatalf("stats = %+v after %v", s, d)
			}
		})
	}
}

// A wait near the largest Duration still fails fast against a deadline:
// now+wait would overflow to a time long past, and the retry would sleep
// until the context ended.
func TestNextAtHugeWaitPastDeadline(t *testing.T) {
	r, err := NewRetrier(RetryPolicy{BaseDelay: math.MaxInt64, MaxDelay: math.MaxInt64, Random: func() float64 { return 0.9 }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(100 * 365 * 24 * time.Hour) // a simulator's clock may be far along
	r.BeginAt(now)
	if wait, d := r.NextAt(now, 1, 0, now.Add(time.Hour)); d != PastDeadline {
		t.Fatalf("NextAt = (%v, %v), want PastDeadline", wait, d)
	}
}

// A deadline centuries ago saturates the clock at the smallest int64:
// it is past, not a difference that overflows to the far future.
func TestNextAtAncientDeadline(t *testing.T) {
	r, err := NewRetrier(RetryPolicy{Random: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r.BeginAt(now)
	if wait, d := r.NextAt(now, 1, 0, time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)); d != PastDeadline {
		t.Fatalf("NextAt = (%v, %v), want PastDeadline", wait, d)
	}
	if s := r.Stats(); s.Retries != 0 {
		t.Errorf("stats %+v: a retry was counted", s)
	}
}

// flaky fails its first n calls with err, then succeeds; it records when each
// call happened.
type flaky struct {
	n     int
	err   error
	calls []time.Time
}

func (f *flaky) call(ctx context.Context) error {
	f.calls = append(f.calls, time.Now())
	if len(f.calls) <= f.n {
		return f.err
	}
	return nil
}

func TestDo(t *testing.T) {
	zero := func() float64 { return 0 }
	hinted := &sluice.RejectError{Reason: sluice.ReasonRate, RetryAfter: 2 * time.Second}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fails   int
		err     error
		timeout time.Duration
		calls   int
		elapsed time.Duration
		want    error
	}{
		{"succeeds at once", 0, boom, 0, 1, 0, nil},
		{"honours the hint between attempts", 2, hinted, 0, 3, 4 * time.Second, nil},
		{"gives up after MaxAttempts", 5, hinted, 0, 3, 4 * time.Second, hinted},
		{"permanent error is not retried", 5, Permanent(boom), 0, 1, 0, boom},
		{"local throttling is not retried", 5, errThrottled, 0, 1, 0, sluice.ErrThrottled},
		{"a wait past the deadline is not started", 5, hinted, time.Second, 1, 0, hinted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _ := NewRetrier(RetryPolicy{Random: zero})
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				f := &flaky{n: tt.fails, err: tt.err}
				start := time.Now()
				err := r.Do(ctx, f.call)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("Do = %v, want %v", err, tt.want)
				}
				if _, ok := err.(*permanentError); ok {
					t.Fatal("Do returned the Permanent wrapper, want the error inside")
				}
				if len(f.calls) != tt.calls || time.Since(start) != tt.elapsed {
					t.Fatalf("%d calls over %v, want %d over %v", len(f.calls), time.Since(start), tt.calls, tt.elapsed)
				}
			})
		})
	}
}

// A caller that leaves during the wait ends Do with the context's error
// and the last one; the retry it was waiting for was never made, so it is
// given back to the budget and not counted.
func TestDoCancelledDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := oneRetryBudget(t)
		r, _ := NewRetrier(RetryPolicy{Budget: b, Random: func() float64 { return 0 }})
		ctx, cancel := context.WithCancel(t.Context())
		hinted := sluice.Reject(sluice.ReasonRate, 5*time.Second)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		err := r.Do(ctx, func(context.Context) error { return hinted })
		if !errors.Is(err, context.Canceled) || !errors.Is(err, sluice.ErrRate) {
			t.Fatalf("Do = %v, want both context.Canceled and the last error", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("returned after %v, want 1s (when ctx was cancelled)", d)
		}
		if s := r.Stats(); s != (RetryStats{Requests: 1}) {
			t.Errorf("stats %+v, want 1 request and no retry", s)
		}
		if !b.TryRetry() {
			t.Error("the budget's one retry is gone: the retry cancelled in its wait spent it")
		}
	})
}

// TestDoCancelledAttemptIsNotCharged: an attempt that fails after the caller
// left ends Do without a retry, and so without taking one from the budget
// (shared with other requests) or counting it. The retry was decided,
// charged and counted, then the wait returned at once.
func TestDoCancelledAttemptIsNotCharged(t *testing.T) {
	b := oneRetryBudget(t)
	r, _ := NewRetrier(RetryPolicy{Budget: b})
	boom := errors.New("backend said no")
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := r.Do(ctx, func(context.Context) error { calls++; cancel(); return boom })
		if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, boom) {
			t.Fatalf("%d calls, Do = %v; want 1 call, an error matching context.Canceled and the attempt's", calls, err)
		}
	}
	if s := r.Stats(); s != (RetryStats{Requests: 5}) {
		t.Errorf("stats %+v, want 5 requests and no retry", s)
	}
	// A budget of one retry per request, 5 requests: all 5 retries left.
	for i := range 5 {
		if !b.TryRetry() {
			t.Fatalf("retry %d of 5 refused: the cancelled attempts took from the budget", i+1)
		}
	}
}

// TestDoPermanentHTTPErrors: an http.Client error that every retry would
// meet again ends Do at once with that very error, without a wait or a
// retry taken from the budget. A refused connection still is retried.
func TestDoPermanentHTTPErrors(t *testing.T) {
	tlsSrv := untrusted(t)
	plain := newScript(t)
	host := strings.TrimPrefix(plain.srv.URL, "http://")
	tests := []struct {
		name  string
		url   string
		calls int
	}{
		{"unsupported protocol scheme", "ftp://" + host + "/", 1},
		{"untrusted certificate", tlsSrv.URL, 1},
		{"HTTPS to an HTTP server", "https://" + host + "/", 1},
		{"connection refused is retried", "http://" + refusing(t) + "/", 3},
		// The *url.Error's text quotes the URL: a phrase of net/http's
		// refusals in it does not make a refused connection permanent.
		// (A path's spaces are escaped in that text; a query's are not.)
		{"connection refused to a URL naming a refusal is retried", "http://" + refusing(t) + "/search?q=unsupported protocol scheme", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &http.Client{Transport: trustingNothing().base}
				r, _ := NewRetrier(RetryPolicy{Random: func() float64 { return 0.5 }})
				var last error
				calls := 0
				start := time.Now()
				err := r.Do(t.Context(), func(ctx context.Context) error {
					calls++
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, tt.url, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					last = err
					return err
				})
				if err == nil || err != last {
					t.Errorf("Do = %v, want the last attempt's error as it is (%v)", err, last)
				}
				if s := r.Stats(); calls != tt.calls || s.Retries != uint64(tt.calls-1) {
					t.Fatalf("%d calls over %v, %d retries charged (err: %v); want %d calls", calls, time.Since(start), s.Retries, err, tt.calls)
				}
			})
		})
	}
}

// oneRetryBudget allows a retry per request over an hour, with no floor:
// after one request and its retry, TryRetry says whether the retry was
// charged.
func oneRetryBudget(t *testing.T) *RetryBudget {
	t.Helper()
	b, err := NewRetryBudget(RetryBudgetConfig{Ratio: 1, MinPerSecond: -1, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
