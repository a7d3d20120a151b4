package concurrency

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

// The fields every fast acquire reads must not share a cache line with
// anything the fast path writes, and the word must be alone in its own.
func TestLayout(t *testing.T) {
	l := mustNew(t, Config{Limit: 4})
	if a := uintptr(unsafe.Pointer(l.hot)); a%64 != 0 {
		t.Errorf("hot at %#x, not 64-byte aligned", a)
	}
	if unsafe.Sizeof(*l.hot) != 64 {
		t.Errorf("hot is %d bytes, want one 64-byte line", unsafe.Sizeof(*l.hot))
	}
	lastRead := unsafe.Offsetof(l.evicts)
	for name, off := range map[string]uintptr{
		"flushed": unsafe.Offsetof(l.flushed), "slowAdmitted": unsafe.Offsetof(l.slowAdmitted),
		"counters": unsafe.Offsetof(l.counters), "queued": unsafe.Offsetof(l.queued),
		"meanSvc": unsafe.Offsetof(l.meanSvc), "mu": unsafe.Offsetof(l.mu), "core": unsafe.Offsetof(l.core),
	} {
		if off < lastRead+64 {
			t.Errorf("%s at offset %d may share a line with the read-mostly fields (up to %d)", name, off, lastRead)
		}
	}
}

// The wide path turns off when fewer than margin permits are free and on
// again only once 2×margin are. Releases check in one admission in 64; the
// limit here is a multiple of 64, so after it is reached every one does.
func TestWideHysteresis(t *testing.T) {
	const limit = 3 * defaultMargin
	l := mustNew(t, Config{Limit: limit})
	if !l.wide.Load() {
		t.Fatal("wide off after New with 3×margin permits free")
	}
	var held []sluice.Permit
	for len(held) < limit {
		held = append(held, mustAcquire(t, l))
		free := limit - len(held)
		if want := free >= defaultMargin; l.wide.Load() != want {
			t.Fatalf("with %d free: wide = %v, want %v", free, l.wide.Load(), want)
		}
	}
	for len(held) > 0 {
		held[len(held)-1].Release(sluice.Success, 0)
		held = held[:len(held)-1]
		free := limit - len(held)
		if want := free >= 2*defaultMargin; l.wide.Load() != want {
			t.Fatalf("with %d free after releases: wide = %v, want %v", free, l.wide.Load(), want)
		}
	}
	if s := l.Stats(); s.Admitted != limit || s.InFlight != 0 {
		t.Errorf("Stats = %+v, want %d admitted, none in flight", s, limit)
	}
}

// A reservation over the limit is given back and the caller rejected on
// the exact path; one that lands on a closed word is erased by the next
// leave. Both leave the counts exact.
func TestPhantoms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, Config{Limit: 1, MaxQueue: 1})
		l.margin = 0 // the wide path right up to the limit
		p := mustAcquire(t, l)
		if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrRejected) {
			t.Fatalf("TryAcquire over the limit = %v, want a rejection", err)
		}
		if s := l.Stats(); s.InFlight != 1 || s.Admitted != 1 {
			t.Fatalf("after an over-limit reservation: %+v, want 1 in flight, 1 admitted", s)
		}
		got := acquireLater(t, l)
		synctest.Wait() // queued: the word is closed
		for range 3 {
			l.wide.Store(true) // as if read just before the word closed
			if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrRejected) {
				t.Fatalf("TryAcquire with a waiter queued = %v, want a rejection", err)
			}
		}
		if s := l.Stats(); s.InFlight != 1 || s.Admitted != 1 || s.Queued != 1 {
			t.Fatalf("after reservations on a closed word: %+v, want 1 in flight, 1 admitted, 1 queued", s)
		}
		p.Release(sluice.Success, 0) // hands the permit to the waiter
		q := <-got
		if s := l.Stats(); s.InFlight != 1 || s.Admitted != 2 || s.Queued != 0 {
			t.Fatalf("after the hand-over: %+v, want 1 in flight, 2 admitted", s)
		}
		q.Release(sluice.Success, 0)
		a, errA := l.TryAcquire()
		if errA != nil {
			t.Fatalf("TryAcquire on an idle limiter = %v", errA)
		}
		a.Release(sluice.Success, 0)
		if s := l.Stats(); s.InFlight != 0 || s.Admitted != 3 || s.Limit != 1 {
			t.Fatalf("at rest: %+v, want nothing in flight, 3 admitted", s)
		}
	})
}

// TestStressBoundary hammers the limit from many goroutines with Acquire,
// TryAcquire, cancels and SetLimit interleaved, with the wide path on right
// up to the limit (margin 0) so that reservations over the limit and on a
// closed word are frequent, and checks under -race that the permits held
// never exceed the largest limit set and that Stats counts every admission.
func TestStressBoundary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		cfg   Config
	}{
		{"limit=1", 1, Config{Limit: 1}},
		{"limit=2/queue", 2, Config{Limit: 2, MaxQueue: 4, MaxWait: time.Millisecond}},
		{"limit=3/lifo", 3, Config{Limit: 3, MaxQueue: 2, Discipline: LIFO}},
		{"limit=3/aimd", 3, Config{MaxQueue: 2, Algorithm: mustAIMD(t, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustNew(t, tc.cfg)
			l.margin = 0
			l.setWide(true)
			var held, over, ok atomic.Int64
			var workers, resizer sync.WaitGroup
			stop := make(chan struct{})
			if tc.cfg.Algorithm == nil {
				resizer.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							_ = l.SetLimit(tc.limit)
							return
						default:
						}
						_ = l.SetLimit(1 + i%tc.limit)
					}
				})
			}
			for g := range 8 {
				workers.Go(func() {
					for i := range 3000 {
						var p sluice.Permit
						var err error
						switch (g + i) % 3 {
						case 0:
							p, err = l.TryAcquire()
						case 1:
							p, err = l.Acquire(context.Background())
						default:
							ctx, cancel := context.WithCancel(context.Background())
							if i%2 == 0 {
								cancel()
							}
							p, err = l.Acquire(ctx)
							cancel()
						}
						if err != nil {
							if !errors.Is(err, sluice.ErrRejected) && !errors.Is(err, context.Canceled) {
								t.Errorf("unexpected error %v", err)
							}
							continue
						}
						ok.Add(1)
						if n := held.Add(1); n > int64(tc.limit) {
							over.Store(n)
						}
						held.Add(-1)
						if i%7 == 0 {
							p.Cancel()
						} else {
							p.Release(sluice.Outcome(i%3), time.Duration(i%5)*time.Microsecond)
						}
					}
				})
			}
			workers.Wait()
			close(stop)
			resizer.Wait()
			if n := over.Load(); n > 0 {
				t.Errorf("%d permits held at once, above the limit %d", n, tc.limit)
			}
			s := l.Stats()
			if s.InFlight != 0 || s.Queued != 0 {
				t.Errorf("at rest: %+v, want nothing in flight or queued", s)
			}
			if s.Admitted != uint64(ok.Load()) {
				t.Errorf("Admitted = %d, callers got %d permits", s.Admitted, ok.Load())
			}
		})
	}
}

func mustAIMD(t *testing.T, limit int) *adaptive.AIMD {
	t.Helper()
	a, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: limit, MinLimit: 1, MaxLimit: limit, Interval: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAdmissionCountWide is TestAdmissionCount on the wide path: far from
// the limit every admission is one add, and flushes move half the count at
// a time. Admitted must never go back and must be exact at the end.
func TestAdmissionCountWide(t *testing.T) {
	l := mustNew(t, Config{Limit: 1 << 20})
	const per, workers = 3*flushAt + 17, 4
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		var last uint64
		for {
			select {
			case <-done:
				return
			default:
			}
			s := l.Stats()
			if s.Admitted < last {
				t.Errorf("Admitted went back from %d to %d", last, s.Admitted)
				return
			}
			last = s.Admitted
		}
	})
	acquireReleaseFrom(t, l, workers, per)
	close(done)
	reader.Wait()
	if !l.wide.Load() {
		t.Error("the wide path is off: this test did not exercise it")
	}
	if s := l.Stats(); s.Admitted != per*workers || s.InFlight != 0 {
		t.Errorf("Stats = %+v, want %d admitted", s, per*workers)
	}
}
