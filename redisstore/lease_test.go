package redisstore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func newConcurrency(t testing.TB, s *Store, cfg ConcurrencyConfig) *Concurrency {
	t.Helper()
	l, err := NewConcurrency(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func leases(t testing.TB, s *Store, key string) int64 {
	t.Helper()
	n, err := s.Client().ZCard(context.Background(), "sluice:conc:{"+key+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Four replicas (each its own store and client) share a limit of 20 while
// 64 workers ask: a loopback origin counts the requests in flight and
// never sees more than 20. One replica "crashes" mid-run (its limiter and
// store stop without releasing); its leases expire after the TTL and no
// slot leaks.
func TestConcurrencySharedLimit(t *testing.T) {
	run := 5 * time.Second
	if testing.Short() {
		run = 2 * time.Second
	}
	const limit = 20
	var inFlight, peak, served atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		inFlight.Add(-1)
		served.Add(1)
	}))
	defer origin.Close()
	origin.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 100

	newStore(t, Config{}) // flushes the shared server
	const key = "shared20"
	const ttl = 600 * time.Millisecond
	var lims [4]*Concurrency
	var stores [4]*Store
	for i := range lims {
		s, err := Open(srv.URL(), Config{Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
		lims[i], err = NewConcurrency(s, ConcurrencyConfig{Key: key, Limit: limit, TTL: ttl, MaxWait: 100 * time.Millisecond, Failure: FailClosed})
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	var crashed atomic.Bool
	for w := range 64 {
		wg.Go(func() {
			lim := lims[w%4]
			for ctx.Err() == nil {
				if w%4 == 3 && crashed.Load() {
					return
				}
				p, err := lim.Acquire(ctx)
				if err != nil {
					continue
				}
				if resp, err := origin.Client().Get(origin.URL); err == nil {
					resp.Body.Close()
				}
				if w%4 == 3 && crashed.Load() {
					return // the crashed replica never releases
				}
				p.Release(sluice.Success, 0)
			}
		})
	}
	// Crash replica 3 halfway: stop its renewal and its store, holding
	// whatever leases it has.
	time.Sleep(run / 2)
	crashed.Store(true)
	lims[3].Close()
	stores[3].Close()
	wg.Wait()
	heldAtCrash := lims[3].Stats().InFlight
	if heldAtCrash == 0 {
		t.Fatal("the crashed replica held no lease: the leak check below would prove nothing")
	}
	for i := range 3 {
		lims[i].Close()
		stores[i].Close()
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("peak in flight %d > limit %d", p, limit)
	}
	if served.Load() < 100 {
		t.Fatalf("only %d requests served", served.Load())
	}
	time.Sleep(ttl + 50*time.Millisecond)
	s2, err := Open(srv.URL(), Config{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	// The next acquire drops expired leases; count what is left.
	l2 := newConcurrency(t, s2, ConcurrencyConfig{Key: key, Limit: limit, TTL: ttl})
	p, err := l2.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	if n := leases(t, s2, key); n != 1 {
		t.Fatalf("%d leases after the TTL, want only the new one: %d leaked", n, n-1)
	}
	p.Release(sluice.Success, 0)
	t.Logf("peak %d of %d, %d served in %v; %d leases of the crashed replica expired", peak.Load(), limit, served.Load(), run, heldAtCrash)
}

// A holder's lease outlives its TTL while it runs: the renewer extends it.
func TestConcurrencyRenewal(t *testing.T) {
	s := newStore(t, Config{Timeout: 200 * time.Millisecond})
	l := newConcurrency(t, s, ConcurrencyConfig{Key: "renew", Limit: 1, TTL: 300 * time.Millisecond})
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(900 * time.Millisecond) // three TTLs
	if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrLimit) || !errors.Is(err, sluice.ErrCapacity) {
		t.Fatalf("second lease while the first runs: %v", err)
	}
	if ls := l.LimiterStats(); ls.Lost != 0 {
		t.Fatalf("lost %d leases", ls.Lost)
	}
	p.Release(sluice.Success, 0)
	if n := leases(t, s, "renew"); n != 0 {
		t.Fatalf("%d leases after release", n)
	}
	if p2, err := l.TryAcquire(); err != nil {
		t.Fatal(err)
	} else {
		p2.Release(sluice.Success, 0)
	}
}

// A waiting Acquire gets the slot freed by a release; one whose MaxWait
// passes is rejected with ReasonQueueTimeout.
func TestConcurrencyWait(t *testing.T) {
	s := newStore(t, Config{Timeout: 200 * time.Millisecond})
	l := newConcurrency(t, s, ConcurrencyConfig{Key: "wait", Limit: 1, MaxWait: 300 * time.Millisecond})
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); p.Release(sluice.Success, 0) }()
	p2, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	start := time.Now()
	if _, err := l.Acquire(t.Context()); !errors.Is(err, sluice.ErrQueueTimeout) {
		t.Fatalf("second waiter: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("rejected after %v, before MaxWait", d)
	}
	p2.Release(sluice.Success, 0)
}
