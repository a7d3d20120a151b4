package concurrency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

func Example() {
	l, err := concurrency.New(concurrency.Config{
		Limit:      2,
		MaxQueue:   10,
		MaxWait:    50 * time.Millisecond,
		Discipline: concurrency.AdaptiveLIFO,
	})
	if err != nil {
		panic(err)
	}
	p, err := l.Acquire(context.Background())
	if err != nil {
		fmt.Println("rejected:", err) // a *sluice.RejectError: shed, queue full, …
		return
	}
	start := time.Now()
	// ... do the work ...
	p.Release(sluice.Success, time.Since(start))
	fmt.Println("admitted:", l.Stats().Admitted)
	// Output: admitted: 1
}

func ExampleNew() {
	_, err := concurrency.New(concurrency.Config{Limit: 0})
	fmt.Println(errors.Is(err, sluice.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// sluice/concurrency: Config.Limit = 0: must be 1 to 16777215, or set Config.Algorithm for an adaptive limit
}

func ExampleLimiter_TryAcquire() {
	l, _ := concurrency.New(concurrency.Config{Limit: 1})
	p, _ := l.TryAcquire()
	_, err := l.TryAcquire()
	fmt.Println(errors.Is(err, sluice.ErrLimit), sluice.ReasonOf(err))
	p.Release(sluice.Success, time.Millisecond)
	p, err = l.TryAcquire()
	fmt.Println(err)
	p.Cancel() // the work never ran
	// Output:
	// true limit
	// <nil>
}

func ExampleLimiter_SetLimit() {
	l, _ := concurrency.New(concurrency.Config{Limit: 1})
	p1, _ := l.TryAcquire()
	if err := l.SetLimit(2); err != nil {
		panic(err)
	}
	p2, err := l.TryAcquire()
	fmt.Println("after growing:", err)
	_ = l.SetLimit(1) // held permits are never revoked
	s := l.Stats()
	fmt.Println("limit", s.Limit, "in flight", s.InFlight)
	p1.Release(sluice.Success, 0)
	p2.Release(sluice.Success, 0)
	// Output:
	// after growing: <nil>
	// limit 1 in flight 2
}

func ExampleLimiter_Acquire() {
	l, _ := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1, MaxWait: 10 * time.Millisecond})
	held, _ := l.Acquire(context.Background())
	// The next caller queues, and gives up after MaxWait.
	_, err := l.Acquire(context.Background())
	fmt.Println(errors.Is(err, sluice.ErrQueueTimeout))
	held.Release(sluice.Success, 0)
	// Output: true
}

// An adaptive concurrency limit: the Limiter feeds AIMD every Success and
// Dropped, and AIMD's answer becomes the limit. AIMD shows it in two
// steps; for a service, adaptive.Little behind a LIFO queue is the
// recommended limit (httplimit's Example_recommended sets it up).
func ExampleConfig_algorithm() {
	aimd, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: 8})
	if err != nil {
		panic(err)
	}
	l, err := concurrency.New(concurrency.Config{Algorithm: aimd, MaxQueue: 16})
	if err != nil {
		panic(err)
	}
	fmt.Println("limit:", l.Stats().Limit)
	p, _ := l.Acquire(context.Background())
	p.Release(sluice.Dropped, 2*time.Second) // a timeout upstream: back off
	fmt.Println("after a drop:", l.Stats().Limit)
	// Output:
	// limit: 8
	// after a drop: 6
}

// Stats reads atomics only, cheap enough to scrape often.
func ExampleLimiter_Stats() {
	l, _ := concurrency.New(concurrency.Config{Limit: 1})
	p, _ := l.TryAcquire()
	l.TryAcquire() // rejected: the only permit is held
	s := l.Stats()
	fmt.Println("limit", s.Limit, "in flight", s.InFlight, "admitted", s.Admitted, "rejected", s.Rejected[sluice.ReasonLimit])
	p.Release(sluice.Success, time.Millisecond)
	// Output: limit 1 in flight 1 admitted 1 rejected 1
}
