package concurrency

import (
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
		got := acquireLater(t, l)
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

// SetLimit drains the cache, but a release that read wide just before
// SetLimit closed the word may cache its permit only after SetLimit has
// reopened it with the lower limit: the word is open, so the release
// leaves the permit there. The next acquire must not take it while the
// permits counted are over the new limit. wide is set by hand to stand for
// that release's stale read (toCache has no blocking point to stop it at).
func TestCacheAfterLimitLowered(t *testing.T) {
	l := mustNew(t, Config{Limit: 1000})
	var held []sluice.Permit
	for range 150 {
		held = append(held, mustAcquire(t, l))
	}
	if err := l.SetLimit(10); err != nil {
		t.Fatal(err)
	}
	l.wide.Store(true) // the release below read wide before SetLimit
	held[0].Release(sluice.Ignore, 0)
	if p, err := l.TryAcquire(); err == nil {
		p.Release(sluice.Ignore, 0)
		t.Fatalf("TryAcquire admitted with 149 held and the limit lowered to 10")
	}
	if s := l.Stats(); s.InFlight != 149 {
		t.Errorf("InFlight = %d, want the 149 still held", s.InFlight)
	}
	for i := 1; i < len(held); i++ {
		held[i].Release(sluice.Ignore, 0)
	}
	var again []sluice.Permit
	for {
		p, err := l.TryAcquire()
		if err != nil {
			break
		}
		again = append(again, p)
	}
	if len(again) != 10 {
		t.Errorf("%d admitted once every permit was back, want the new limit 10", len(again))
	}
	for i := range again {
		again[i].Release(sluice.Ignore, 0)
	}
	if s := l.Stats(); s.InFlight != 0 {
		t.Errorf("at rest: %+v, want nothing in flight", s)
	}
}

// A release that read wide just before a waiter's arrival closed the word
// may put its permit in a stripe after enter drained the cache; it takes
// the permit back and releases it through the Core (to the waiter) once it
// sees the word closed. Until then the permit is in the cache, and an
// acquirer that takes it must not jump the queue with it. The release
// stopped between its two steps is played by hand.
func TestCacheNoQueueJump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, Config{Limit: 1, MaxQueue: 1})
		p := mustAcquire(t, l)
		got := acquireLater(t, l)
		synctest.Wait()
		if s := l.Stats(); s.Queued != 1 {
			t.Fatalf("Queued = %d, want 1", s.Queued)
		}
		// p's release, first step: its permit lands in a stripe (p is not
		// released otherwise: this is its release).
		l.cache.CompareAndSwap(nil, newCache())
		c := l.cache.Load()
		c.s[0].w.Add(1)
		c.maybe.Store(true)
		_ = p
		if q, err := l.TryAcquire(); err == nil {
			q.Release(sluice.Ignore, 0)
			t.Error("TryAcquire took a permit from the cache while a caller was queued")
		}
		// Second step: the word is closed, so the release takes its stripe
		// back and releases through the Core.
		for k := takeAll(&c.s[0]); k > 0; k-- {
			l.releaseCore(0, canceled, 0)
		}
		synctest.Wait()
		select {
		case q := <-got:
			q.Release(sluice.Success, 0)
		default:
			t.Fatal("the waiter is still queued: the permit released went elsewhere")
		}
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Admitted != 2 {
			t.Errorf("at rest: %+v, want nothing in flight or queued, 2 admitted", s)
		}
	})
}
