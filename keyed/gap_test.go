package keyed_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/keyed"
)

// hookGate is a gate that runs hook, once, at the start of its first
// acquisition: between the Map's lookup and the acquisition proper.
type hookGate struct {
	gate
	hook  func()
	calls int
}

func (g *hookGate) TryAcquire() (sluice.Permit, error) {
	g.calls++
	if h := g.hook; h != nil {
		g.hook = nil
		h()
	}
	return g.gate.TryAcquire()
}

func (g *hookGate) Acquire(ctx context.Context) (sluice.Permit, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Permit{}, err
	}
	return g.TryAcquire()
}

// A key evicted between the Map's lookup and the acquisition from its
// limiter (not busy yet, so the sweep may take it) must not leave its caller
// holding a permit of the evicted limiter while the key has a new one:
// that would be two limiters, twice the concurrency, for one key.
func TestEvictionBetweenLookupAndAcquire(t *testing.T) {
	for _, try := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var m *keyed.Map[*hookGate]
			var held sluice.Permit
			hooked := false
			m = mustNew(t, keyed.Config[*hookGate]{MaxKeys: 2, IdleTimeout: time.Second, New: func(key string) (*hookGate, error) {
				g := &hookGate{gate: gate{key: key, n: 1}}
				if key == "a" && !hooked {
					hooked = true
					g.hook = func() {
						time.Sleep(2 * time.Second) // a and c idle
						mustGet(t, m, "b")          // the table is full: the sweep evicts
						var err error
						if held, err = m.TryAcquire("a"); err != nil {
							t.Fatalf("a, evicted, did not come back: %v", err)
						}
					}
				}
				return g, nil
			}})
			mustGet(t, m, "c")
			var err error
			if try {
				_, err = m.TryAcquire("a")
			} else {
				_, err = m.Acquire(context.Background(), "a")
			}
			if st := m.Stats(); st.Evicted == 0 {
				t.Fatalf("nothing evicted: %+v", st)
			}
			if err == nil {
				t.Fatal("a admitted twice at once with a limit of 1: once by its evicted limiter")
			}
			if sluice.ReasonOf(err) != sluice.ReasonLimit {
				t.Fatalf("err = %v, want a rejection by a's live limiter", err)
			}
			held.Release(sluice.Success, 0)
		})
	}
}

// A rebuild between the lookup and the acquisition moves the key, limiter
// and all: the permit stands, and is the limiter's only one.
func TestRebuildBetweenLookupAndAcquire(t *testing.T) {
	var m *keyed.Map[*hookGate]
	var a *hookGate
	m = mustNew(t, keyed.Config[*hookGate]{MaxKeys: 100, IdleTimeout: time.Hour, New: func(key string) (*hookGate, error) {
		g := &hookGate{gate: gate{key: key, n: 1}}
		if key == "a" {
			a = g
			g.hook = func() {
				for i := range 50 { // grows the shard's index: rebuilds
					mustGet(t, m, "k"+strconv.Itoa(i))
				}
			}
		}
		return g, nil
	}})
	p, err := m.TryAcquire("a")
	if err != nil {
		t.Fatalf("a rejected: %v", err)
	}
	if n := a.inFlight.Load(); n != 1 || a.calls != 1 {
		t.Fatalf("a's limiter holds %d permits after %d acquisitions, want 1 and 1 (no retry)", n, a.calls)
	}
	if mustGet(t, m, "a") != a {
		t.Fatal("a has a new limiter")
	}
	p.Release(sluice.Success, 0)
}
