package rate

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWait(t *testing.T) {
	type result struct {
		reason     sluice.Reason // ReasonUnknown: admitted
		ctxErr     error
		elapsed    time.Duration
		retryAfter time.Duration
		tokens     float64 // after the call
	}
	tests := []struct {
		name    string
		cfg     Config
		drain   int           // tokens taken before the call
		timeout time.Duration // 0: no deadline
		n       int
		want    result
	}{
		{"tokens there: no wait", Config{Rate: 10, Burst: 2}, 0, 0, 2,
			result{tokens: 0}},
		{"waits for a token", Config{Rate: 10, Burst: 1}, 1, 0, 1,
			result{elapsed: 100 * time.Millisecond, tokens: 0}},
		{"waits within the deadline", Config{Rate: 10, Burst: 1}, 1, 101 * time.Millisecond, 1,
			result{elapsed: 100 * time.Millisecond, tokens: 0}},
		{"deadline too close: fails at once", Config{Rate: 10, Burst: 1}, 1, 50 * time.Millisecond, 1,
			result{reason: sluice.ReasonDeadline, retryAfter: 100 * time.Millisecond, tokens: 0}},
		{"ready exactly at the deadline is too late", Config{Rate: 10, Burst: 1}, 1, 100 * time.Millisecond, 1,
			result{reason: sluice.ReasonDeadline, retryAfter: 100 * time.Millisecond, tokens: 0}},
		{"MaxWait too short: fails at once", Config{Rate: 10, Burst: 1, MaxWait: 99 * time.Millisecond}, 1, 0, 1,
			result{reason: sluice.ReasonQueueTimeout, retryAfter: 100 * time.Millisecond, tokens: 0}},
		{"MaxWait is inclusive", Config{Rate: 10, Burst: 1, MaxWait: 100 * time.Millisecond}, 1, 0, 1,
			result{elapsed: 100 * time.Millisecond, tokens: 0}},
		{"the nearer of deadline and MaxWait names the reason", Config{Rate: 10, Burst: 1, MaxWait: time.Second}, 1, 50 * time.Millisecond, 1,
			result{reason: sluice.ReasonDeadline, retryAfter: 100 * time.Millisecond, tokens: 0}},
		{"n > burst: fails at once", Config{Rate: 10, Burst: 1}, 0, 0, 2,
			result{reason: sluice.ReasonTooLarge, tokens: 1}},
		{"rate 0, empty: fails at once", Config{Rate: 0, Burst: 1}, 1, 0, 1,
			result{reason: sluice.ReasonRate, tokens: 0}},
		{"Inf: never waits", Config{Rate: Inf}, 0, 0, 1 << 30,
			result{tokens: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := mustBucket(t, tt.cfg)
				if tt.drain > 0 && !b.AllowN(tt.drain) {
					t.Fatal("drain failed")
				}
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				start := time.Now()
				err := b.WaitN(ctx, tt.n)
				got := result{reason: sluice.ReasonOf(err), elapsed: time.Since(start), tokens: b.Tokens()}
				if !errors.Is(err, sluice.ErrRejected) {
					got.ctxErr = err
				}
				got.retryAfter, _ = sluice.RetryAfter(err)
				if tt.cfg.Rate == Inf {
					got.tokens = 0
				}
				if got != tt.want {
					t.Fatalf("WaitN = %v:\n got %+v\nwant %+v", err, got, tt.want)
				}
				if got.reason == sluice.ReasonDeadline && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("a deadline rejection must match context.DeadlineExceeded: %v", err)
				}
			})
		})
	}
}

func TestWaitCancelRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 1, Burst: 1})
		b.Allow()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- b.Wait(ctx) }()
		synctest.Wait()
		if got := b.Stats().Queued; got != 1 {
			t.Fatalf("Queued = %d while waiting, want 1", got)
		}
		if got := b.Tokens(); got != -1 {
			t.Fatalf("tokens while waiting = %v, want -1 (reserved)", got)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if got := b.Tokens(); got < 0.299 || got > 0.301 {
			t.Fatalf("tokens after cancel = %v, want 0.3 (the reservation refunded)", got)
		}
		s := b.Stats()
		if s.Queued != 0 || s.Admitted != 1 || s.RejectedTotal() != 0 {
			t.Fatalf("stats after cancel: %+v", s)
		}
	})
}

func TestWaitDoneContext(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1, Burst: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a done context = %v", err)
	}
	if b.Tokens() != 1 {
		t.Fatal("a done context took a token")
	}
}

// Waiters are served at the rate, each one interval after the previous.
func TestWaitersSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 10, Burst: 1})
		start := time.Now()
		done := make(chan time.Duration, 5)
		for range 5 {
			go func() {
				if err := b.Wait(t.Context()); err != nil {
					t.Error(err)
				}
				done <- time.Since(start)
			}()
		}
		seen := map[time.Duration]bool{}
		for range 5 {
			seen[<-done] = true
		}
		for i := range 5 {
			if d := time.Duration(i) * 100 * time.Millisecond; !seen[d] {
				t.Fatalf("no waiter done at %v: %v", d, seen)
			}
		}
	})
}

// In sluice.All a later rejection cancels the bucket's permit: the token
// comes back.
func TestAcquireRefundInAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 1, Burst: 1})
		never := mustBucket(t, Config{Rate: 1, Burst: 0})
		l := sluice.All(b, never)
		if _, err := l.Acquire(t.Context()); !errors.Is(err, sluice.ErrTooLarge) {
			t.Fatalf("All.Acquire = %v", err)
		}
		if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrTooLarge) {
			t.Fatalf("All.TryAcquire = %v", err)
		}
		if got := b.Tokens(); got != 1 {
			t.Fatalf("tokens = %v after the composition rejected, want 1", got)
		}
		p, err := b.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		p.Release(sluice.Success, 0)
		if got := b.Tokens(); got != 0 {
			t.Fatalf("a released (not cancelled) permit gave its token back: %v", got)
		}
	})
}

// The live setters read the clock themselves; SetMaxWait bounds later waits.
func TestLiveSetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 1, Burst: 1})
		b.Allow()
		if err := b.SetRate(1000); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if !b.Allow() || b.Allow() {
			t.Fatal("SetRate(1000): want one token after 1 ms")
		}
		if err := b.SetBurst(5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !b.AllowN(5) {
			t.Fatal("SetBurst(5): want 5 tokens after a second")
		}
		if err := b.SetMaxWait(time.Millisecond); err != nil {
			t.Fatal(err)
		}
		b.AllowN(5)
		if err := b.WaitN(t.Context(), 2); !errors.Is(err, sluice.ErrQueueTimeout) {
			t.Fatalf("WaitN(2) needing 2 ms with MaxWait 1 ms = %v", err)
		}
		if err := b.WaitN(t.Context(), 1); err != nil {
			t.Fatalf("WaitN(1) needing 1 ms with MaxWait 1 ms = %v", err)
		}
		if got := b.Config(); got != (Config{Rate: 1000, Burst: 5, MaxWait: time.Millisecond}) {
			t.Fatalf("Config() = %+v", got)
		}
	})
}
