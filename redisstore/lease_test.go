package redisstore

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
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

func leaseCount(t testing.TB, s *Store, key string) int64 {
	t.Helper()
	n, err := s.Client().ZCard(context.Background(), "sluice:conc:{"+key+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var long = flag.Bool("redisstore.long", false, "run the shared-lease test for 60 s with replicas killed at random")

type replica struct {
	s    *Store
	l    *Concurrency
	dead atomic.Bool
}

// Four replicas (each its own store and client) share a limit of 20 while
// 64 workers ask: a loopback origin counts the requests in flight and
// never sees more than 20. Replicas are killed mid-run (limiter and store
// stop without releasing, holding at least 5 leases each) and replaced by
// fresh ones; their leases expire after the TTL and no slot leaks. 5 s in
// make test; 60 s with a kill every 5 s with -redisstore.long:
//
//	cd redisstore && go test -race -run TestConcurrencySharedLimit -redisstore.long -v .
func TestConcurrencySharedLimit(t *testing.T) {
	run, every := 5*time.Second, 2500*time.Millisecond
	if *long {
		run, every = 60*time.Second, 5*time.Second
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
	start := func() *replica {
		s, err := Open(srv.URL(), Config{Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewConcurrency(s, ConcurrencyConfig{Key: key, Limit: limit, TTL: ttl, MaxWait: 100 * time.Millisecond, Failure: FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		return &replica{s: s, l: l}
	}
	var slots [4]atomic.Pointer[replica]
	for i := range slots {
		slots[i].Store(start())
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r := slots[w%4].Load()
				p, err := r.l.Acquire(ctx)
				if err != nil {
					continue
				}
				if resp, err := origin.Client().Get(origin.URL); err == nil {
					resp.Body.Close()
				}
				if r.dead.Load() {
					continue // a killed replica never releases
				}
				p.Release(sluice.Success, 0)
			}
		})
	}
	// The killer: every interval, a random replica takes 5 leases for
	// work that never finishes, then dies; a fresh one takes its slot.
	killed, leaked := 0, 0
	tick := time.NewTicker(every)
kill:
	for {
		select {
		case <-ctx.Done():
			break kill
		case <-tick.C:
		}
		i := rand.IntN(4)
		r := slots[i].Load()
		for got, tries := 0, 0; got < 5 && tries < 200; tries++ {
			if _, err := r.l.Acquire(context.Background()); err == nil {
				got++
			}
		}
		r.dead.Store(true)
		slots[i].Store(start())
		leaked += r.l.Stats().InFlight
		r.l.Close()
		r.s.Close()
		killed++
	}
	tick.Stop()
	wg.Wait()
	for i := range slots {
		slots[i].Load().l.Close()
		slots[i].Load().s.Close()
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("peak in flight %d > limit %d", p, limit)
	}
	if served.Load() < 20 {
		t.Fatalf("only %d requests served", served.Load())
	}
	if killed == 0 || leaked == 0 {
		t.Fatalf("%d replicas killed holding %d leases: the leak check below would prove nothing", killed, leaked)
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
	if n := leaseCount(t, s2, key); n != 1 {
		t.Fatalf("%d leases after the TTL, want only the new one: %d leaked", n, n-1)
	}
	p.Release(sluice.Success, 0)
	t.Logf("peak %d of %d, %d served in %v; %d replicas killed holding %d leases, 0 leaked", peak.Load(), limit, served.Load(), run, killed, leaked)
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
	if n := leaseCount(t, s, "renew"); n != 0 {
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
	// Release once the waiter has tried and polled again (two calls), so
	// that it gets the slot by polling, not at its first try.
	calls := s.Stats().Calls
	go func() {
		for s.Stats().Calls < calls+2 {
			time.Sleep(100 * time.Microsecond)
		}
		p.Release(sluice.Success, 0)
	}()
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

// Leases work on a Redis Cluster: the set sits in one slot by its hash tag.
func TestConcurrencyCluster(t *testing.T) {
	s := openStore(t, cluster.URL(), Config{Timeout: time.Second}, false)
	key := "cluster-" + time.Now().Format("150405.000000")
	l := newConcurrency(t, s, ConcurrencyConfig{Key: key, Limit: 2})
	p1, err1 := l.TryAcquire()
	p2, err2 := l.TryAcquire()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
		t.Fatalf("third lease on a limit of 2: %v", err)
	}
	p1.Release(sluice.Success, 0)
	p2.Release(sluice.Success, 0)
	if n := leaseCount(t, s, key); n != 0 {
		t.Fatalf("%d leases after release", n)
	}
}

// Leases held while Redis loses its data (FLUSHALL here; a restart
// without persistence or a failover to a replica that had not got them
// alike) are added back by their holder's next renewal: Redis counts
// them again, another replica is admitted only up to the limit, and they
// still leave the set on release. Without that, Redis undercounts until
// they are released, and the other replica admits a whole limit on top.
// The renewals are driven by the test (the TTL is an hour).
func TestLeasesBackAfterRedisLosesThem(t *testing.T) {
	rs, s1 := ownStore(t, Config{Timeout: time.Second})
	s2 := openStore(t, rs.URL(), Config{Timeout: time.Second}, false)
	const limit, held = 4, 3
	cfg := ConcurrencyConfig{Key: "flushed", Limit: limit, TTL: time.Hour}
	a, ka, kb := newConcurrency(t, s1, cfg), newKeyedConcurrency(t, s1, cfg), newKeyedConcurrency(t, s2, cfg)
	for _, tc := range []struct {
		name  string
		l     *leases
		a, b  sluice.Limiter
		count func() int64 // members of the set in Redis
	}{
		{"Concurrency", &a.leases, a, newConcurrency(t, s2, cfg), func() int64 { return leaseCount(t, s1, cfg.Key) }},
		{"KeyedConcurrency", &ka.leases, ka.Key("k"), kb.Key("k"), func() int64 { return keyedLeases(t, s1, cfg.Key, "k") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []sluice.Permit
			for range held {
				p, err := tc.a.TryAcquire()
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			if err := s1.Client().FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			renewals := tc.l.LimiterStats().Renewals
			tc.l.renewOnce()
			if n := tc.l.LimiterStats().Renewals - renewals; n != 1 {
				t.Fatalf("%d renewal calls answered, want 1", n)
			}
			if n := tc.count(); n != held {
				t.Errorf("after FLUSHALL and a renewal, Redis counts %d of the %d leases held", n, held)
			}
			if lost := tc.l.LimiterStats().Lost; lost != held {
				t.Errorf("Lost = %d, want %d", lost, held)
			}
			other := takeAll(t, tc.b, sluice.ErrLimit, 2*limit)
			if len(other) != limit-held {
				t.Errorf("the other replica admitted %d with %d held: %d in flight, limit %d", len(other), held, held+len(other), limit)
			}
			tc.l.renewOnce() // found in Redis: neither added nor counted lost again
			if n, lost := tc.count(), tc.l.LimiterStats().Lost; n != int64(held+len(other)) || lost != held {
				t.Errorf("a second renewal: %d leases in Redis, %d lost; want %d and %d", n, lost, held+len(other), held)
			}
			for _, p := range append(ps, other...) {
				p.Release(sluice.Success, 0)
			}
			if n := tc.count(); n != 0 {
				t.Errorf("%d leases after every release", n)
			}
		})
	}
}

// A renewal adds back the leases Redis no longer has, so one released
// while the renewal was under way, its ZREM run before the renewal's
// script, is added back with no permit holding it: the renewal orphans
// it and removes it before it ends, rather than let it hold a slot for
// TTL. The race is laid out by hand: the renewal's call is made of the
// lease as renewOnce would, after the release.
func TestRenewalOrphansALeaseReleasedMeanwhile(t *testing.T) {
	s := newStore(t, Config{Timeout: time.Second})
	for _, answer := range []string{"answered", "lost"} {
		t.Run(answer, func(t *testing.T) {
			key := "renew-release-" + answer
			l := newConcurrency(t, s, ConcurrencyConfig{Key: key, Limit: 2, TTL: time.Hour})
			p, err := l.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			c := &renewal{set: l.set, args: []any{l.ttlMs}}
			l.mu.Lock()
			for tok, ls := range l.held {
				c.tokens = append(c.tokens, tok)
				c.args = append(c.args, ls.id)
			}
			l.mu.Unlock()
			p.Release(sluice.Success, 0)
			v, err := s.eval(renewScript, []string{c.set}, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if n := leaseCount(t, s, key); n != 1 {
				t.Fatalf("%d leases after the renewal's script: the test needs the released one added back", n)
			}
			if answer == "lost" { // the script ran, its answer did not come
				v, err = nil, context.DeadlineExceeded
			}
			l.renewed(c, v, err)
			if ls := l.LimiterStats(); ls.Lost != 0 {
				t.Errorf("Lost = %d for a lease released, want 0", ls.Lost)
			}
			l.renewOnce()
			if n := leaseCount(t, s, key); n != 0 {
				t.Errorf("%d leases after the renewal, none held", n)
			}
		})
	}
}
