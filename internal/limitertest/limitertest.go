// Package limitertest is the conformance suite every sluice.Limiter runs:
// the contract of package sluice, checked the same way for each
// implementation (a token bucket, a concurrency limiter, All, the keyed
// limiters, the instrumented limiter, the shared limiters on Redis).
//
//	func TestConformance(t *testing.T) {
//		limitertest.Run(t, limitertest.Config{
//			New: func(t *testing.T) sluice.Limiter {
//				b, err := rate.NewBucket(rate.Config{Burst: 3}) // rate 0: no refill
//				if err != nil {
//					t.Fatal(err)
//				}
//				return b
//			},
//			Capacity: 3,
//			Quota:    true,
//			Spends:   true,
//		})
//	}
//
// The suite runs in real time and makes no timing assertion, so it suits
// limiters that talk to a server: a "never waits" or "honours its deadline"
// check is a call that returns while nothing could have freed capacity. A
// call that hangs instead fails the test after a generous bound (10 s), so a
// broken limiter fails rather than stalls the run.
package limitertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
)

// Config describes the limiter under test.
type Config struct {
	// New returns a fresh limiter, for one subtest. Its capacity must not
	// come back with time while a subtest runs: give a rate limiter rate 0
	// (or one so small that no token comes within a minute), and a limiter
	// with a queue no MaxWait shorter than a second. Required.
	New func(t *testing.T) sluice.Limiter
	// Capacity is how many TryAcquire calls a fresh limiter admits before
	// it rejects. At least 1.
	Capacity int
	// Quota says the limiter rejects a caller over its quota (a rate
	// limit: errors match sluice.ErrQuota, HTTP 429) rather than because
	// it is at capacity (sluice.ErrCapacity, HTTP 503).
	Quota bool
	// Spends says Release does not give capacity back: a rate limit's
	// tokens are spent by work that ran. Cancel gives it back either way.
	Spends bool
}

// hang bounds a call the suite expects to return; past it the limiter is
// taken to wait when it must not.
const hang = 10 * time.Second

// Run runs the suite as subtests of t.
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.New == nil || c.Capacity < 1 {
		t.Fatalf("limitertest: Config needs New and a Capacity of at least 1, got %+v", c)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("AdmitsThenRejects", func(t *testing.T) { admitsThenRejects(t, c) })
	t.Run("CancelGivesBack", func(t *testing.T) { cancelGivesBack(t, c) })
	t.Run("ReleaseOnce", func(t *testing.T) { releaseOnce(t, c) })
	t.Run("TryAcquireNeverWaits", func(t *testing.T) { tryNeverWaits(t, c) })
	t.Run("AcquireDoneContext", func(t *testing.T) { acquireDoneContext(t, c) })
	t.Run("AcquireCancel", func(t *testing.T) { acquireCancel(t, c) })
	t.Run("AcquireDeadline", func(t *testing.T) { acquireDeadline(t, c) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, c) })
}

// fill takes the whole capacity of l with TryAcquire.
func fill(t *testing.T, l sluice.Limiter, n int) []sluice.Permit {
	t.Helper()
	ps := make([]sluice.Permit, n)
	for i := range ps {
		p, err := l.TryAcquire()
		if err != nil {
			t.Fatalf("TryAcquire %d of a capacity of %d: %v", i+1, n, err)
		}
		ps[i] = p
	}
	return ps
}

func cancelAll(ps []sluice.Permit) {
	for i := range ps {
		ps[i].Cancel()
	}
}

// checkRejection checks that err is a rejection matching ErrRejected, its
// reason's sentinel and exactly one of ErrQuota and ErrCapacity (the one
// quota says, unless quota is nil).
func checkRejection(t *testing.T, what string, err error, quota *bool) {
	t.Helper()
	if !errors.Is(err, sluice.ErrRejected) {
		t.Errorf("%s: %v does not match sluice.ErrRejected", what, err)
		return
	}
	r := sluice.ReasonOf(err)
	if r == sluice.ReasonUnknown || !errors.Is(err, r.Err()) {
		t.Errorf("%s: %v carries no reason whose sentinel it matches", what, err)
	}
	q, c := errors.Is(err, sluice.ErrQuota), errors.Is(err, sluice.ErrCapacity)
	if q == c {
		t.Errorf("%s: %v matches ErrQuota %v and ErrCapacity %v, want exactly one", what, err, q, c)
	} else if quota != nil && q != *quota {
		t.Errorf("%s: %v matches ErrQuota %v, want %v", what, err, q, *quota)
	}
	if d, ok := sluice.RetryAfter(err); !ok || d < 0 {
		t.Errorf("%s: RetryAfter(%v) = %v, %v; want a hint >= 0", what, err, d, ok)
	}
}

// admitsThenRejects: Capacity admissions, then a rejection, counted exactly.
func admitsThenRejects(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	p, err := l.TryAcquire()
	if err == nil {
		p.Cancel()
		t.Fatalf("TryAcquire admitted past a capacity of %d", c.Capacity)
	}
	if p.Held() {
		t.Errorf("a rejection returned a permit that holds something")
	}
	checkRejection(t, "full limiter", err, &c.Quota)
	s := l.Stats()
	if s.Admitted != uint64(c.Capacity) || s.RejectedTotal() != 1 {
		t.Errorf("Stats: %d admitted, %d rejected; want %d and 1", s.Admitted, s.RejectedTotal(), c.Capacity)
	}
	if s.Rejected[sluice.ReasonOf(err)] != 1 {
		t.Errorf("Stats.Rejected = %v, want the rejection under its reason %v", s.Rejected, sluice.ReasonOf(err))
	}
}

// cancelGivesBack: a cancelled permit's capacity can be taken again.
func cancelGivesBack(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	ps[0].Cancel()
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatalf("TryAcquire after a Cancel: %v, want the cancelled capacity", err)
	}
	ps[0] = p
	if p, err := l.TryAcquire(); err == nil {
		p.Cancel()
		t.Fatal("Cancel gave back more than one permit")
	}
}

// releaseOnce: a permit acts once, however often it is released or
// cancelled; Release frees capacity unless Spends.
func releaseOnce(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	ps[0].Release(sluice.Success, time.Millisecond)
	if ps[0].Held() {
		t.Error("a released permit still holds something")
	}
	ps[0].Release(sluice.Dropped, time.Millisecond)
	ps[0].Cancel()
	free := 0
	for range 2 {
		p, err := l.TryAcquire()
		if err != nil {
			break
		}
		free++
		ps = append(ps, p)
	}
	want := 1
	if c.Spends {
		want = 0
	}
	if free != want {
		t.Errorf("after one permit was released three times, %d admitted; want %d", free, want)
	}
}

// returns runs f in a goroutine and fails t if it does not return within
// hang.
func returns[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(hang):
		t.Fatalf("%s did not return within %v", what, hang)
		panic("unreachable")
	}
}

type result struct {
	p   sluice.Permit
	err error
}

// tryNeverWaits: on a full limiter TryAcquire rejects at once (nothing can
// free capacity meanwhile, so any wait would be forever).
func tryNeverWaits(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	r := returns(t, "TryAcquire on a full limiter", func() result { p, err := l.TryAcquire(); return result{p, err} })
	if r.err == nil {
		r.p.Cancel()
		t.Fatal("TryAcquire admitted on a full limiter")
	}
	checkRejection(t, "TryAcquire", r.err, &c.Quota)
}

// acquireDoneContext: Acquire with a context already done returns its
// error and admits nothing, even with capacity free.
func acquireDoneContext(t *testing.T, c Config) {
	l := c.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := returns(t, "Acquire with a done context", func() result { p, err := l.Acquire(ctx); return result{p, err} })
	if r.err == nil {
		r.p.Cancel()
		t.Fatal("Acquire admitted with a done context")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Acquire with a done context = %v, want context.Canceled", r.err)
	}
	if s := l.Stats(); s.Admitted != 0 || s.RejectedTotal() != 0 {
		t.Errorf("Stats = %d admitted, %d rejected; a done context is neither", s.Admitted, s.RejectedTotal())
	}
	fill(t, l, c.Capacity) // and it took nothing
}

// acquireCancel: a full limiter's Acquire ends when its context is
// cancelled (or rejects at once), and leaves no claim on the capacity.
func acquireCancel(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { p, err := l.Acquire(ctx); done <- result{p, err} }()
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(hang):
		t.Fatalf("Acquire did not return within %v of its context's cancel", hang)
	}
	if r.err == nil {
		r.p.Cancel()
		t.Fatal("Acquire admitted on a full limiter")
	}
	if !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, sluice.ErrRejected) {
		t.Errorf("cancelled Acquire = %v, want context.Canceled or a rejection", r.err)
	}
	ps[0].Cancel()
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatalf("TryAcquire after the cancelled Acquire and a Cancel: %v; the cancelled wait kept a claim", err)
	}
	ps[0] = p
}

// acquireDeadline: a full limiter's Acquire returns by its context's
// deadline, with the deadline's error or a rejection.
func acquireDeadline(t *testing.T, c Config) {
	l := c.New(t)
	ps := fill(t, l, c.Capacity)
	defer cancelAll(ps)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := returns(t, "Acquire with a deadline", func() result { p, err := l.Acquire(ctx); return result{p, err} })
	if r.err == nil {
		r.p.Cancel()
		t.Fatal("Acquire admitted on a full limiter")
	}
	if !errors.Is(r.err, context.DeadlineExceeded) && !errors.Is(r.err, sluice.ErrRejected) {
		t.Errorf("Acquire past its deadline = %v, want context.DeadlineExceeded or a rejection", r.err)
	}
	if errors.Is(r.err, sluice.ErrRejected) {
		checkRejection(t, "Acquire with a deadline", r.err, &c.Quota)
	}
}

// concurrent: many goroutines acquire, release and cancel while others
// read Stats; the counts the callers saw are the counts Stats reports, and
// nothing stays in flight. Run it under -race.
func concurrent(t *testing.T, c Config) {
	const goroutines, rounds = 8, 200
	l := c.New(t)
	var admitted, rejected atomic.Uint64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = l.Stats()
			}
		}
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				p, err := l.TryAcquire()
				if err != nil {
					if !errors.Is(err, sluice.ErrRejected) {
						t.Errorf("TryAcquire: %v is not a rejection", err)
						return
					}
					rejected.Add(1)
					continue
				}
				admitted.Add(1)
				if (g+i)%2 == 0 {
					p.Release(sluice.Success, time.Microsecond)
				} else {
					p.Cancel()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	s := l.Stats()
	if s.Admitted != admitted.Load() || s.RejectedTotal() != rejected.Load() {
		t.Errorf("Stats: %d admitted, %d rejected; the callers saw %d and %d",
			s.Admitted, s.RejectedTotal(), admitted.Load(), rejected.Load())
	}
	if s.InFlight != 0 || s.Queued != 0 {
		t.Errorf("Stats: %d in flight, %d queued after every permit ended", s.InFlight, s.Queued)
	}
	if admitted.Load() < uint64(c.Capacity) {
		t.Errorf("%d admitted in all, fewer than the capacity %d", admitted.Load(), c.Capacity)
	}
}
