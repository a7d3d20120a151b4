package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// gate is a Limiter of one permit that never waits: the smallest
// implementation of the contract, to show what NewPermit is for.
type gate struct{ held atomic.Bool }

func (g *gate) TryAcquire() (sluice.Permit, error) {
	if !g.held.CompareAndSwap(false, true) {
		return sluice.Permit{}, sluice.Reject(sluice.ReasonLimit, 0)
	}
	return sluice.NewPermit(g, 0), nil
}

func (g *gate) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return g.TryAcquire()
}

// Release is called once per permit, by the Permit.
func (g *gate) Release(_ uint64, o sluice.Outcome, latency time.Duration) {
	fmt.Println("released:", o, latency)
	g.held.Store(false)
}

// Cancel is called instead of Release when the work never ran.
func (g *gate) Cancel(uint64) {
	fmt.Println("cancelled")
	g.held.Store(false)
}

func (g *gate) Stats() sluice.Stats { return sluice.Stats{Limit: 1} }

// A limiter hands out permits made with NewPermit; the Permit makes sure its
// Release runs once however often the caller releases.
func ExampleNewPermit() {
	var l sluice.Limiter = &gate{}
	p, _ := l.TryAcquire()
	_, err := l.TryAcquire()
	fmt.Println(errors.Is(err, sluice.ErrLimit))

	p.Release(sluice.Success, 20*time.Millisecond)
	p.Release(sluice.Dropped, time.Second) // a second release does nothing
	fmt.Println("held:", p.Held())
	// Output:
	// true
	// released: success 20ms
	// held: false
}

// Cancel gives back a permit whose work never ran, for instance because a
// later limiter in a composition said no.
func ExamplePermit_Cancel() {
	l := &gate{}
	p, _ := l.TryAcquire()
	p.Cancel()
	_, err := l.TryAcquire()
	fmt.Println("admitted again:", err == nil)
	// Output:
	// cancelled
	// admitted again: true
}

// A rate limiter's rejection tells the caller it sent too much (HTTP 429)
// rather than that the service is busy (HTTP 503).
func ExampleRejectQuota() {
	err := sluice.RejectQuota(sluice.ReasonDeadline, 250*time.Millisecond)
	var re *sluice.RejectError
	errors.As(err, &re)
	fmt.Println(re.Reason, re.Quota, re.RetryAfter)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// deadline true 250ms
	// true
}

func ExampleStats_RejectedTotal() {
	var s sluice.Stats
	s.Rejected[sluice.ReasonQueueFull] = 3
	s.Rejected[sluice.ReasonShed] = 2
	fmt.Println(s.RejectedTotal())
	// Output: 5
}
