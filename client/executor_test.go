package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// TestExecutorNoBatchGaps drives tasks of mixed lengths through an Executor
// in virtual time and checks that each one starts at the very instant a slot
// frees: the start times must equal greedy list scheduling's, which a batching
// executor (or one that leaves a slot idle) cannot reach.
func TestExecutorNoBatchGaps(t *testing.T) {
	const n = 3
	durations := []time.Duration{5, 1, 1, 1, 7, 2, 3, 1, 1, 4, 2, 2, 9, 1, 1, 1, 3, 1}
	for i := range durations {
		durations[i] *= time.Second
	}

	// Greedy list scheduling: task k starts when the earliest slot frees.
	free := make([]time.Duration, n)
	want := make([]time.Duration, len(durations))
	var makespan time.Duration
	for k, d := range durations {
		i := slices.Index(free, slices.Min(free))
		want[k] = free[i]
		free[i] += d
		makespan = max(makespan, free[i])
	}
	// What "start n, wait for all n, repeat" takes, for the log.
	var batched time.Duration
	for b := range slices.Chunk(durations, n) {
		batched += slices.Max(b)
	}

	synctest.Test(t, func(t *testing.T) {
		e, err := NewExecutor(n)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := make([]time.Duration, len(durations))
		var running, peak atomic.Int64
		for k, d := range durations {
			err := e.Go(t.Context(), func(context.Context) error {
				got[k] = time.Since(start)
				peak.Store(max(peak.Load(), running.Add(1)))
				time.Sleep(d)
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Wait(); err != nil {
			t.Fatal(err)
		}
		total := time.Since(start)
		t.Logf("%d tasks at most %d at once: %v (batches of %d would take %v)", len(durations), n, total, n, batched)
		if !slices.Equal(got, want) {
			t.Fatalf("start times\n got %v\nwant %v", got, want)
		}
		if total != makespan {
			t.Fatalf("took %v, want %v", total, makespan)
		}
		if p := peak.Load(); p != n {
			t.Fatalf("peak in flight = %d, want %d", p, n)
		}
		if s := e.Stats(); s.Started != uint64(len(durations)) || s.InFlight != 0 || s.Limit != n {
			t.Fatalf("stats = %+v", s)
		}
	})
}

// TestExecutorCancelStopsQueued: a submitter waiting for a slot gives up when
// its context ends, and the task never runs.
func TestExecutorCancelStopsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := NewExecutor(1)
		ctx, cancel := context.WithCancel(t.Context())
		if err := e.Go(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		ran := false
		err := e.Go(ctx, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Fatalf("Go = %v after %v, want context.Canceled after 1s", err, time.Since(start))
		}
		// Once cancelled, nothing more starts, even with a free slot.
		if err := e.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want the running task's context.Canceled", err)
		}
		if err := e.Go(ctx, func(context.Context) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Go on a done context = %v, want context.Canceled", err)
		}
		if e.Wait(); ran {
			t.Fatal("a task submitted after cancellation ran")
		}
	})
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble,
// read from the stack dump's headers ("[chan receive (durable), synctest
// bubble 1]"): runtime.NumGoroutine counts every goroutine of the process,
// and an earlier test's still ending (an HTTP server's, a transport's)
// changed it under this test once in 75 runs with -race.
func bubbleGoroutines(t *testing.T) int {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	self, _, _ := strings.Cut(string(buf), "\n") // the caller's header comes first
	i := strings.Index(self, "synctest bubble ")
	if i < 0 {
		t.Fatalf("not in a synctest bubble: %q", self)
	}
	bubble := self[i:] // "synctest bubble N]:"
	n := 0
	for line := range strings.SplitSeq(string(buf), "\n") {
		if strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, bubble) {
			n++
		}
	}
	return n
}

// TestExecutorBoundsGoroutines: a thousand tasks waiting to be submitted
// cost nothing; only the n running ones have goroutines.
func TestExecutorBoundsGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		e, _ := NewExecutor(n)
		release := make(chan struct{})
		base := bubbleGoroutines(t)
		done := make(chan struct{})
		go func() { // the submitter
			defer close(done)
			for range 1000 {
				e.Go(t.Context(), func(context.Context) error { <-release; return nil })
			}
		}()
		synctest.Wait()
		if got := bubbleGoroutines(t) - base; got != n+1 {
			t.Fatalf("%d goroutines besides the test, want %d running tasks + 1 submitter", got, n)
		}
		if s := e.Stats(); s.InFlight != n || s.Started != n {
			t.Fatalf("stats = %+v, want %d in flight", s, n)
		}
		close(release)
		<-done
		e.Wait()
	})
}

func TestExecutorWaitJoinsErrorsAndResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := NewExecutor(2)
		errA, errB := errors.New("a"), errors.New("b")
		for _, err := range []error{nil, errA, nil, errB} {
			e.Go(t.Context(), func(context.Context) error { time.Sleep(time.Second); return err })
		}
		err := e.Wait()
		if !errors.Is(err, errA) || !errors.Is(err, errB) {
			t.Fatalf("Wait = %v, want both errors", err)
		}
		if s := e.Stats(); s.Failed != 2 || s.Started != 4 {
			t.Fatalf("stats = %+v", s)
		}
		if err := e.Wait(); err != nil {
			t.Fatalf("second Wait = %v, want nil: errors are reported once", err)
		}
	})
}

// A task that ends its goroutine without returning (runtime.Goexit, as
// t.FailNow does) still gives its slot back: the next task runs, and Wait
// returns ErrTaskExited instead of hanging.
func TestExecutorTaskGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := NewExecutor(1)
		e.Go(t.Context(), func(context.Context) error { runtime.Goexit(); return nil })
		ran := false
		if err := e.Go(t.Context(), func(context.Context) error { ran = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := e.Wait(); !errors.Is(err, ErrTaskExited) || !ran {
			t.Fatalf("Wait = %v, second task ran %v; want ErrTaskExited and true", err, ran)
		}
		if s := e.Stats(); s.Failed != 1 || s.InFlight != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

// TestExecutorConcurrentSubmitters runs many submitters against one
// Executor under the race detector.
func TestExecutorConcurrentSubmitters(t *testing.T) {
	e, _ := NewExecutor(3)
	var running, peak atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Go(func() {
			for i := range 50 {
				e.Go(context.Background(), func(context.Context) error {
					r := running.Add(1)
					mu.Lock()
					peak.Store(max(peak.Load(), r))
					mu.Unlock()
					runtime.Gosched()
					running.Add(-1)
					if i%10 == 0 {
						return fmt.Errorf("submitter %d task %d", s, i)
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	err := e.Wait()
	if p := peak.Load(); p > 3 {
		t.Fatalf("peak in flight %d, want at most 3", p)
	}
	if s := e.Stats(); s.Started != 400 || s.Failed != 40 || err == nil {
		t.Fatalf("stats = %+v, err = %v", s, err)
	}
}

func TestNewExecutorRejectsBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := NewExecutor(n); !errors.Is(err, sluice.ErrInvalidConfig) || !containsField(err, "NewExecutor(n)") {
			t.Fatalf("NewExecutor(%d) = %v, want sluice.ErrInvalidConfig", n, err)
		}
	}
}
