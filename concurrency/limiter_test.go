package concurrency

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ sluice.Limiter = (*Limiter)(nil)

func mustNew(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAcquire(t *testing.T, l *Limiter) sluice.Permit {
	t.Helper()
	p, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// acquireLater starts one Acquire on l in a goroutine and returns the
// channel its permit comes on (call synctest.Wait to let it queue).
func acquireLater(t *testing.T, l *Limiter) <-chan sluice.Permit {
	got := make(chan sluice.Permit)
	go func() {
		p, err := l.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	return got
}

// queueUp starts one goroutine per name, in order, each waiting in l's queue
// until it is admitted; admitted names are sent on the returned channel and
// their permits released at once (with Ignore: no sample for an Algorithm).
// synctest.Wait between starts fixes the arrival order.
func queueUp(t *testing.T, l *Limiter, names ...string) <-chan string {
	order := make(chan string, len(names))
	for _, n := range names {
		go func() {
			p, err := l.Acquire(context.Background())
			if err != nil {
				order <- n + ":" + sluice.ReasonOf(err).String()
				return
			}
			order <- n
			p.Release(sluice.Ignore, 0)
		}()
		synctest.Wait()
	}
	return order
}

func collect(ch <-chan string, n int) []string {
	var got []string
	for range n {
		got = append(got, <-ch)
	}
	return got
}

func TestLimiterOrder(t *testing.T) {
	for _, tt := range []struct {
		d    Discipline
		want []string
	}{
		{FIFO, []string{"a", "b", "c"}},
		{LIFO, []string{"c", "b", "a"}},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustNew(t, Config{Limit: 1, MaxQueue: 3, Discipline: tt.d})
				p := mustAcquire(t, l)
				order := queueUp(t, l, "a", "b", "c")
				if s := l.Stats(); s.Queued != 3 || s.InFlight != 1 {
					t.Fatalf("Stats = %+v, want 3 queued, 1 in flight", s)
				}
				p.Release(sluice.Success, time.Millisecond)
				if got := collect(order, 3); !slices.Equal(got, tt.want) {
					t.Errorf("admitted %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func TestLimiterCancelFreesQueueSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, Config{Limit: 1, MaxQueue: 1})
		p := mustAcquire(t, l)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := l.Acquire(ctx); errc <- err }()
		synctest.Wait()
		if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("TryAcquire while full = %v, want ErrLimit", err)
		}
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
		}
		if s := l.Stats(); s.Queued != 0 {
			t.Fatalf("Queued after cancel = %d, want 0", s.Queued)
		}
		// The freed place takes a new waiter, which the release admits.
		order := queueUp(t, l, "b")
		p.Release(sluice.Success, 0)
		if got := <-order; got != "b" {
			t.Errorf("waiter after cancel got %q, want admission", got)
		}
		if s := l.Stats(); s.RejectedTotal() != 1 || s.Admitted != 2 || s.InFlight != 0 {
			t.Errorf("Stats = %+v, want 1 rejection (TryAcquire), 2 admitted, none in flight", s)
		}
	})
}

func TestLimiterContextAlreadyDone(t *testing.T) {
	l := mustNew(t, Config{Limit: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx); err != context.Canceled {
		t.Errorf("Acquire(done ctx) = %v, want context.Canceled", err)
	}
	if s := l.Stats(); s.InFlight != 0 || s.Admitted != 0 {
		t.Errorf("Stats = %+v, want nothing admitted", s)
	}
}

func TestLimiterResize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, Config{Limit: 1, MaxQueue: 5})
		held := []sluice.Permit{mustAcquire(t, l)}
		var mu sync.Mutex
		for range 3 {
			go func() {
				p, err := l.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				held = append(held, p)
				mu.Unlock()
			}()
		}
		synctest.Wait()
		if err := l.SetLimit(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := l.Stats(); s.Limit != 3 || s.InFlight != 3 || s.Queued != 1 {
			t.Fatalf("after growing to 3: %+v, want 3 in flight, 1 queued", s)
		}
		// Shrinking revokes nothing, and admits no one until in flight < 1.
		if err := l.SetLimit(1); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, p := range held[:2] {
			p.Release(sluice.Success, 0)
		}
		last := held[2]
		mu.Unlock()
		synctest.Wait()
		if s := l.Stats(); s.Limit != 1 || s.InFlight != 1 || s.Queued != 1 {
			t.Fatalf("after shrinking to 1 and 2 releases: %+v, want 1 in flight, 1 queued", s)
		}
		last.Release(sluice.Success, 0)
		synctest.Wait()
		if s := l.Stats(); s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("after the last release: %+v, want the waiter in", s)
		}
		mu.Lock()
		held[3].Release(sluice.Success, 0)
		mu.Unlock()
		if err := l.SetLimit(0); !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("SetLimit(0) = %v, want sluice.ErrInvalidConfig", err)
		}
		if err := l.SetLimit(MaxLimit + 1); !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("SetLimit(MaxLimit+1) = %v, want sluice.ErrInvalidConfig", err)
		}
	})
}

func TestLimiterQueueFull(t *testing.T) {
	for _, tt := range []struct {
		d    Discipline
		want []string // what each waiter got, in the order they finish
	}{
		{FIFO, []string{"c:queue_full", "a", "b"}},
		{LIFO, []string{"a:queue_full", "c", "b"}},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustNew(t, Config{Limit: 1, MaxQueue: 2, Discipline: tt.d})
				p := mustAcquire(t, l)
				order := queueUp(t, l, "a", "b", "c")
				got := collect(order, 1)
				p.Release(sluice.Success, 0)
				got = append(got, collect(order, 2)...)
				if !slices.Equal(got, tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
				if s := l.Stats(); s.Rejected[sluice.ReasonQueueFull] != 1 || s.Admitted != 3 {
					t.Errorf("Stats = %+v", s)
				}
			})
		})
	}
}

func TestLimiterNoQueue(t *testing.T) {
	l := mustNew(t, Config{Limit: 1})
	p := mustAcquire(t, l)
	_, err := l.Acquire(context.Background())
	if !errors.Is(err, sluice.ErrLimit) {
		t.Errorf("Acquire with no queue = %v, want ErrLimit", err)
	}
	p.Release(sluice.Success, 0)
	p.Release(sluice.Success, 0) // a second release does nothing
	q, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	q.Cancel()
	if s := l.Stats(); s.InFlight != 0 || s.Admitted != 2 || s.Rejected[sluice.ReasonLimit] != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

// A Permit copied and released twice is a caller's bug, but it must not
// corrupt the limiter: the fast path's word packs the limit above the
// in-flight count, and a decrement below zero would borrow from the limit
// and leave in flight at 2^24-1, refusing everyone for good.
func TestLimiterDoubleReleaseOfACopy(t *testing.T) {
	l := mustNew(t, Config{Limit: 2})
	p := mustAcquire(t, l)
	dup := p // the bug: a copy released as well
	p.Release(sluice.Success, 0)
	dup.Release(sluice.Success, 0)
	if s := l.Stats(); s.Limit != 2 || s.InFlight != 0 {
		t.Fatalf("after a double release: limit %v, in flight %d; want 2 and 0", s.Limit, s.InFlight)
	}
	a, errA := l.TryAcquire()
	b, errB := l.TryAcquire()
	if errA != nil || errB != nil {
		t.Fatalf("TryAcquire after a double release = %v, %v; want two permits", errA, errB)
	}
	a.Release(sluice.Success, 0)
	b.Release(sluice.Success, 0)
}
