package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// deadStore is a store whose redis-server is gone (its port closed): every
// decision goes to the failure policy. Its replica count is what the
// heartbeat last stored; the tests below set it as a heartbeat would.
func deadStore(t *testing.T) *Store {
	t.Helper()
	rs, s := ownStore(t, Config{Timeout: 20 * time.Millisecond})
	rs.Close()
	return s
}

// takeAll takes permits with TryAcquire until one is rejected (with
// want), at most max.
func takeAll(t *testing.T, l sluice.Limiter, want error, max int) []sluice.Permit {
	t.Helper()
	var ps []sluice.Permit
	for range max {
		p, err := l.TryAcquire()
		if err != nil {
			if !errors.Is(err, want) {
				t.Fatalf("local rejection: %v", err)
			}
			break
		}
		ps = append(ps, p)
	}
	return ps
}

// A change of the replica count resizes FailLocal's concurrency limiter:
// the permits it holds stay counted against the new local limit (a new
// limiter would admit a second full set on top of them), and releasing
// them frees slots under it.
func TestFailLocalReplicasChangeKeepsPermits(t *testing.T) {
	s := deadStore(t)
	cfg := ConcurrencyConfig{Key: "resize", Limit: 4, Failure: FailLocal}
	for _, tc := range []struct {
		name string
		l    sluice.Limiter
	}{
		{"Concurrency", newConcurrency(t, s, cfg)},
		{"KeyedConcurrency", newKeyedConcurrency(t, s, cfg).Key("k")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.replicas.Store(1)
			held := takeAll(t, tc.l, sluice.ErrLimit, 10)
			if len(held) != 4 {
				t.Fatalf("1 replica: admitted %d, want 4", len(held))
			}
			s.replicas.Store(2) // local limit 2, with 4 held
			if ps := takeAll(t, tc.l, sluice.ErrLimit, 10); len(ps) != 0 {
				t.Fatalf("2 replicas, 4 held: admitted %d more, want 0 (in flight %d > local limit 2)", len(ps), 4+len(ps))
			}
			for _, p := range held[:3] {
				p.Release(sluice.Success, 0)
			}
			ps := takeAll(t, tc.l, sluice.ErrLimit, 10)
			if len(ps) != 1 {
				t.Fatalf("2 replicas, 1 held: admitted %d, want 1", len(ps))
			}
			held = append(held[3:], ps...)
			s.replicas.Store(1) // local limit 4, with 2 held
			ps = takeAll(t, tc.l, sluice.ErrLimit, 10)
			if len(ps) != 2 {
				t.Fatalf("1 replica, 2 held: admitted %d, want 2", len(ps))
			}
			for _, p := range append(held, ps...) {
				p.Release(sluice.Success, 0)
			}
			if ps := takeAll(t, tc.l, sluice.ErrLimit, 10); len(ps) != 4 {
				t.Fatalf("all released: admitted %d, want 4", len(ps))
			}
		})
	}
}

// A change of the replica count resizes FailLocal's buckets: a key keeps
// the tokens it has, capped at the new burst (a new bucket would start
// full, letting a burst through).
func TestFailLocalReplicasChangeKeepsTokens(t *testing.T) {
	s := deadStore(t)
	// 40 shared, refilling one token in 1,000 s: none during the test.
	b := newBuckets(t, s, RateConfig{Rate: 0.001, Burst: 40, Failure: FailLocal})
	k := b.Key("k")
	s.replicas.Store(2) // burst 20
	if n := len(takeAll(t, k, sluice.ErrRate, 15)); n != 15 {
		t.Fatalf("2 replicas: admitted %d, want 15", n)
	}
	s.replicas.Store(4) // burst 10, 5 left
	if n := len(takeAll(t, k, sluice.ErrRate, 40)); n != 5 {
		t.Fatalf("4 replicas, 5 tokens left: admitted %d, want 5", n)
	}
	s.replicas.Store(1) // burst 40, none left
	if n := len(takeAll(t, k, sluice.ErrRate, 40)); n != 0 {
		t.Fatalf("1 replica, no token left: admitted %d, want 0", n)
	}

	// The cap: 39 tokens left at burst 40, 10 at burst 10. A weighted
	// request for more than is left takes nothing.
	if _, err := b.TryAcquire("full"); err != nil {
		t.Fatal(err)
	}
	s.replicas.Store(4)
	if _, err := b.TakeN("full", 6); err != nil {
		t.Fatalf("6 of 10 tokens: %v", err)
	}
	if _, err := b.TakeN("full", 6); !errors.Is(err, sluice.ErrRate) {
		t.Fatalf("6 of 4 tokens: %v", err)
	}
	if n := len(takeAll(t, b.Key("full"), sluice.ErrRate, 40)); n != 4 {
		t.Fatalf("4 replicas, 4 tokens left: admitted %d, want 4", n)
	}
}

// FailLocal decides weighted requests as the shared bucket does: AcquireN
// waits for its n tokens, TakeN's rejection says when they come, and
// Cancel gives them back.
func TestFailLocalWeighted(t *testing.T) {
	s := deadStore(t)
	s.replicas.Store(1)
	// 1,000 tokens/s: AcquireN's wait for 5 is 5 ms.
	b := newBuckets(t, s, RateConfig{Rate: 1000, Burst: 10, Failure: FailLocal})
	if _, err := b.TakeN("wait", 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := b.AcquireN(ctx, "wait", 5); err != nil {
		t.Errorf("AcquireN(5) on an empty bucket refilling 1,000/s, no deadline for 10 s: %v", err)
	}

	// 10 tokens/s: 5 tokens take 500 ms.
	slow := newBuckets(t, s, RateConfig{Rate: 10, Burst: 10, Failure: FailLocal})
	if _, err := slow.TakeN("retry", 10); err != nil {
		t.Fatal(err)
	}
	_, err := slow.TakeN("retry", 5)
	if d, ok := sluice.RetryAfter(err); !errors.Is(err, sluice.ErrRate) || !ok || d < 400*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("TakeN(5) on an empty bucket refilling 10/s = %v (retry-after %v), want a rate rejection retrying after about 500ms", err, d)
	}

	// A token in 1,000 s: only a refund gives one back.
	none := newBuckets(t, s, RateConfig{Rate: 0.001, Burst: 10, Failure: FailLocal})
	p, err := none.TakeN("cancel", 10)
	if err != nil {
		t.Fatal(err)
	}
	p.Cancel()
	if _, err := none.TakeN("cancel", 10); err != nil {
		t.Errorf("TakeN(10) after the 10 taken were cancelled: %v", err)
	}

	// More than this replica's share of the burst (40 over 4 replicas),
	// which the shared bucket holds: a rate limit, not a request too large
	// ever to fit (which a client would never retry).
	s.replicas.Store(4)
	shared := newBuckets(t, s, RateConfig{Rate: 1000, Burst: 40, Failure: FailLocal})
	if _, err := shared.TakeN("share", 15); !errors.Is(err, sluice.ErrRate) {
		t.Errorf("TakeN(15) with a local share of 10 of a burst of 40 = %v, want a rate rejection", err)
	}
}

// MaxWait bounds the whole wait of Acquire: a waiter that polled Redis
// for part of it and then falls to FailLocal (Redis died) waits in the
// local limiter only for what is left, not a whole MaxWait more.
func TestFailLocalWaitKeepsMaxWait(t *testing.T) {
	rs, s := ownStore(t, Config{Timeout: 20 * time.Millisecond})
	const maxWait = 400 * time.Millisecond
	cfg := ConcurrencyConfig{Key: "waitlocal", Limit: 1, Replicas: 1, Failure: FailLocal, MaxWait: maxWait, PollMax: 10 * time.Millisecond}
	c := newConcurrency(t, s, cfg)
	k := newKeyedConcurrency(t, s, cfg)
	for _, tc := range []struct {
		name  string
		l     sluice.Limiter
		local func() (sluice.Permit, error) // takes the local limiter's one slot
	}{
		{"Concurrency", c, func() (sluice.Permit, error) { return c.localLimiter().TryAcquire() }},
		{"KeyedConcurrency", k.Key("k"), func() (sluice.Permit, error) {
			set, _ := k.set("k")
			m, err := k.localMap("k", set)
			if err != nil {
				return sluice.Permit{}, err
			}
			return m.TryAcquire("k")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rs.Restart(); err != nil {
				t.Fatal(err)
			}
			var shared sluice.Permit
			var err error
			for i := 0; ; i++ { // the store may still be reconnecting
				shared, err = tc.l.TryAcquire()
				if err == nil && tc.l.Stats().InFlight == 1 {
					break
				}
				shared.Release(sluice.Success, 0) // FailLocal's, while Redis did not answer
				if i == 100 {
					t.Fatalf("no shared lease: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			defer shared.Release(sluice.Success, 0)
			// The local slot: taken here, or already counting the lease.
			lp, err := tc.local()
			if err != nil && !errors.Is(err, sluice.ErrLimit) {
				t.Fatal(err)
			}
			defer lp.Release(sluice.Success, 0)
			start := time.Now()
			killed := make(chan struct{})
			time.AfterFunc(maxWait*3/4, func() { rs.Kill(); close(killed) }) // the waiter has polled Redis for 3/4 of MaxWait
			_, err = tc.l.Acquire(t.Context())
			el := time.Since(start)
			<-killed
			if !errors.Is(err, sluice.ErrQueueTimeout) {
				t.Fatalf("Acquire with both slots held = %v, want a queue timeout", err)
			}
			if el > maxWait+150*time.Millisecond {
				t.Fatalf("Acquire rejected after %v: MaxWait is %v", el, maxWait)
			}
		})
	}
}

// FailLocal's local limit counts the leases this replica still holds in
// Redis: when Redis goes away, work admitted through Redis is still in
// flight, and the local limiter must not admit its share on top of it.
// Releasing such a lease frees its slot, to a local waiter first.
func TestFailLocalCountsLeasesHeld(t *testing.T) {
	rs, s := ownStore(t, Config{Timeout: 20 * time.Millisecond})
	cfg := ConcurrencyConfig{Key: "held", Limit: 4, Replicas: 1, Failure: FailLocal}
	c := newConcurrency(t, s, cfg)
	k := newKeyedConcurrency(t, s, cfg)
	set, _ := k.set("k")
	limiters := []struct {
		name   string
		l      sluice.Limiter
		queued func() int // callers waiting in the local limiter
	}{
		{"Concurrency", c, func() int { return c.localLimiter().Stats().Queued }},
		{"KeyedConcurrency", k.Key("k"), func() int { return keyedLocal(t, k, set).Stats().Queued }},
	}
	shared := make([][]sluice.Permit, len(limiters))
	for i, tc := range limiters {
		for range 3 {
			p, err := tc.l.TryAcquire()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			shared[i] = append(shared[i], p)
		}
	}
	rs.Kill()
	for i, tc := range limiters {
		t.Run(tc.name, func(t *testing.T) {
			if ps := takeAll(t, tc.l, sluice.ErrLimit, 10); len(ps) != 1 {
				t.Fatalf("Redis gone with 3 of 4 leases held here: FailLocal admitted %d, want 1", len(ps))
			}
			// A waiter for the local limiter gets the slot of a released lease.
			got := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := tc.l.Acquire(ctx)
				got <- err
			}()
			deadline := time.Now().Add(5 * time.Second)
			for tc.queued() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the waiter never queued")
				}
				time.Sleep(time.Millisecond)
			}
			shared[i][0].Release(sluice.Success, 0)
			if err := <-got; err != nil {
				t.Fatalf("waiter after a lease was released: %v", err)
			}
			shared[i][1].Release(sluice.Success, 0)
			shared[i][2].Release(sluice.Success, 0)
			if ps := takeAll(t, tc.l, sluice.ErrLimit, 10); len(ps) != 2 {
				t.Fatalf("every lease released, 2 local permits held: admitted %d, want 2", len(ps))
			}
		})
	}
}

// Permits FailLocal admitted while Redis was away are counted by Redis
// once it answers again: the holder's first renewal adds them as leases,
// so the other replicas admit only what is left of the limit (without
// that, a whole Limit on top of them, until they were released). One
// released while Redis is still away costs nothing there: no orphan, no
// round trip. The renewals are driven by the test (the TTL is an hour).
func TestFailLocalPermitsCountedWhenRedisReturns(t *testing.T) {
	rs, s1 := ownStore(t, Config{Timeout: 20 * time.Millisecond})
	const limit = 4
	cfg := ConcurrencyConfig{Key: "returns", Limit: limit, Replicas: 2, TTL: time.Hour, Failure: FailLocal}
	c, k := newConcurrency(t, s1, cfg), newKeyedConcurrency(t, s1, cfg)
	set, _ := k.set("k")
	for _, tc := range []struct {
		name  string
		l     *leases
		a     sluice.Limiter
		b     func(*Store) sluice.Limiter // the same limit on another replica
		count func(*Store) int64          // members of the set in Redis
		local func() int                  // permits FailLocal's limiter holds
	}{
		{"Concurrency", &c.leases, c,
			func(s *Store) sluice.Limiter { return newConcurrency(t, s, cfg) },
			func(s *Store) int64 { return leaseCount(t, s, cfg.Key) },
			func() int { return c.localLimiter().Stats().InFlight }},
		{"KeyedConcurrency", &k.leases, k.Key("k"),
			func(s *Store) sluice.Limiter { return newKeyedConcurrency(t, s, cfg).Key("k") },
			func(s *Store) int64 { return keyedLeases(t, s, cfg.Key, "k") },
			func() int { return keyedLocal(t, k, set).Stats().InFlight }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs.Kill()
			local := takeAll(t, tc.a, sluice.ErrLimit, 2*limit)
			if len(local) != limit/2 {
				t.Fatalf("Redis gone: FailLocal admitted %d, want %d of %d over 2 replicas", len(local), limit/2, limit)
			}
			local[0].Release(sluice.Success, 0)
			tc.l.mu.Lock()
			orphans := len(tc.l.orphans)
			tc.l.mu.Unlock()
			if orphans != 0 {
				t.Errorf("%d orphans from a local permit released with Redis away", orphans)
			}
			p, err := tc.a.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			local[0] = p
			if err := rs.Restart(); err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ { // the store may still be reconnecting
				if _, err := s1.eval(releaseScript, []string{"sluice:probe"}, "x"); err == nil {
					break
				} else if i == 100 {
					t.Fatalf("Redis does not answer after the restart: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			tc.l.renewOnce()
			if n := tc.count(s1); n != int64(len(local)) {
				t.Errorf("Redis back and a renewal: it counts %d of the %d permits FailLocal admitted", n, len(local))
			}
			if ls := tc.l.LimiterStats(); ls.Lost != 0 {
				t.Errorf("Lost = %d: a permit FailLocal admitted was never in Redis to be lost", ls.Lost)
			}
			s2 := openStore(t, rs.URL(), Config{Timeout: time.Second}, false)
			other := takeAll(t, tc.b(s2), sluice.ErrLimit, 2*limit)
			if len(other) != limit-len(local) {
				t.Errorf("the other replica admitted %d with %d held by FailLocal: %d in flight, limit %d", len(other), len(local), len(local)+len(other), limit)
			}
			for _, p := range append(local, other...) {
				p.Release(sluice.Success, 0)
			}
			if n := tc.count(s1); n != 0 {
				t.Errorf("%d leases after every release", n)
			}
			if n := tc.local(); n != 0 {
				t.Errorf("FailLocal's limiter holds %d permits after every release", n)
			}
		})
	}
}

// keyedLocal returns the local limiter FailLocal decides key "k" of set
// with.
func keyedLocal(t *testing.T, k *KeyedConcurrency, set string) sluice.Limiter {
	t.Helper()
	m, err := k.localMap("k", set)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := m.Get("k")
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// A wait its context ends under FailLocal is no rejection, as it is on the
// store's own path: it used to be counted, as reason unknown (a series
// promsluice says no limiter produces).
func TestFailLocalCancelledWaitIsNoRejection(t *testing.T) {
	rs, s := ownStore(t, Config{})
	c, err := NewConcurrency(s, ConcurrencyConfig{Key: "cancel", Limit: 1, Replicas: 1, Failure: FailLocal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := NewBuckets(s, RateConfig{Rate: 1, Burst: 1, Replicas: 1, Failure: FailLocal})
	if err != nil {
		t.Fatal(err)
	}
	rs.Kill()
	p, err := c.TryAcquire() // the local limit's one slot
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(sluice.Success, 0)
	if _, err := b.TryAcquire("k"); err != nil { // the local bucket's one token
		t.Fatal(err)
	}
	for name, acquire := range map[string]func(context.Context) error{
		"Concurrency": func(ctx context.Context) error { _, err := c.Acquire(ctx); return err },
		"Buckets":     func(ctx context.Context) error { _, err := b.Acquire(ctx, "k"); return err },
	} {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(20*time.Millisecond, cancel)
		if err := acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Acquire = %v, want context.Canceled", name, err)
		}
	}
	if n := c.Stats().RejectedTotal(); n != 0 {
		t.Errorf("Concurrency counted %d rejections, want 0", n)
	}
	if n := b.Stats().RejectedTotal(); n != 0 {
		t.Errorf("Buckets counted %d rejections, want 0", n)
	}
}
