package keyed_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// gate is the smallest sluice.Limiter that holds permits: up to n at once,
// no queue. The Map's tests need limiters whose identity (key) and in-flight
// count they can see; the rate and concurrency packages are exercised by
// their own tests and by the examples.
type gate struct {
	key      string
	n        int64
	inFlight atomic.Int64
}

func newGate(n int64) func(string) (*gate, error) {
	return func(key string) (*gate, error) { return &gate{key: key, n: n}, nil }
}

func (g *gate) TryAcquire() (sluice.Permit, error) {
	if g.inFlight.Add(1) > g.n {
		g.inFlight.Add(-1)
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

func (g *gate) Release(uint64, sluice.Outcome, time.Duration) { g.inFlight.Add(-1) }
func (g *gate) Cancel(uint64)                                 { g.inFlight.Add(-1) }

func (g *gate) Stats() sluice.Stats {
	return sluice.Stats{Limit: float64(g.n), InFlight: int(g.inFlight.Load())}
}
