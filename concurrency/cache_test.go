package concurrency

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice"
)

// Released permits wait in the cache for the next acquire; Stats counts
// them as free and every admission once.
func TestCacheStats(t *testing.T) {
	l := mustNew(t, Config{Limit: 1000})
	ps := make([]sluice.Permit, 10)
	for i := range ps {
		ps[i] = mustAcquire(t, l)
	}
	for i := range ps {
		ps[i].Release(sluice.Success, 0)
	}
	if held, _ := l.cached(); held == 0 {
		t.Fatal("no permit was cached")
	}
	if s := l.Stats(); s.InFlight != 0 || s.Admitted != 10 {
		t.Fatalf("after 10 releases: %+v, want nothing in flight, 10 admitted", s)
	}
	p := mustAcquire(t, l)
	if _, from := l.cached(); from != 1 {
		t.Errorf("%d admissions from the cache, want the one just made", from)
	}
	if s := l.Stats(); s.InFlight != 1 || s.Admitted != 11 {
		t.Errorf("after one more: %+v, want 1 in flight, 11 admitted", s)
	}
	p.Release(sluice.Success, 0)
}

// Permits cached by one goroutine are not lost to another: at the limit,
// a caller takes them from any stripe before it is refused, and exactly
// the limit is admitted.
func TestCacheNearTheLimit(t *testing.T) {
	const limit = 200
	l := mustNew(t, Config{Limit: limit})
	done := make(chan struct{})
	go func() { // caches up to cacheMax permits in this goroutine's stripe
		defer close(done)
		var ps []sluice.Permit
		for range cacheMax {
			ps = append(ps, mustAcquire(t, l))
		}
		for i := range ps {
			ps[i].Release(sluice.Success, 0)
		}
	}()
	<-done
	if held, _ := l.cached(); held == 0 {
		t.Fatal("no permit was cached")
	}
	var got []sluice.Permit
	for {
		p, err := l.TryAcquire()
		if err != nil {
			break
		}
		got = append(got, p)
	}
	if len(got) != limit {
		t.Errorf("%d admitted, want exactly the limit %d", len(got), limit)
	}
	if s := l.Stats(); s.InFlight != limit {
		t.Errorf("Stats.InFlight = %d, want %d", s.InFlight, limit)
	}
	for i := range got {
		got[i].Release(sluice.Ignore, 0)
	}
	if s := l.Stats(); s.InFlight != 0 {
		t.Errorf("Stats.InFlight = %d after releasing all, want 0", s.InFlight)
	}
}

// Making the Core the truth (any decision under the lock: here SetLimit)
// drains the cache and takes its permits off the Core's count, so the
// queue is decided on the exact count: the limit is admitted, then one
// caller queues and the next release serves it.
func TestCacheDrainedForTheCore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 150
		l := mustNew(t, Config{Limit: limit, MaxQueue: 4})
		var held []sluice.Permit
		for range 10 {
			held = append(held, mustAcquire(t, l))
		}
		for i := range held {
			held[i].Release(sluice.Success, 0)
		}
		if n, _ := l.cached(); n == 0 {
			t.Fatal("no permit was cached")
		}
		if err := l.SetLimit(limit); err != nil {
			t.Fatal(err)
		}
		if n, _ := l.cached(); n != 0 {
			t.Fatalf("%d permits still cached after SetLimit", n)
		}
		held = held[:0]
		for range limit {
			held = append(held, mustAcquire(t, l))
		}
		if s := l.Stats(); s.InFlight != limit || s.Queued != 0 {
			t.Fatalf("at the limit: %+v, want %d in flight and no queue", s, limit)
		}
		got := make(chan sluice.Permit)
		go func() {
			p, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		synctest.Wait()
		if s := l.Stats(); s.Queued != 1 {
			t.Fatalf("Queued = %d, want 1", s.Queued)
		}
		held[0].Release(sluice.Success, 0)
		p := <-got
		p.Release(sluice.Success, 0)
		for i := 1; i < len(held); i++ {
			held[i].Release(sluice.Success, 0)
		}
		if s := l.Stats(); s.InFlight != 0 || s.Admitted != 10+limit+1 {
			t.Errorf("at rest: %+v, want nothing in flight, %d admitted", s, 10+limit+1)
		}
	})
}
