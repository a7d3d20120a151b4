package redisstore

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
)

// With Redis paused the breaker opens after a few timed-out calls; the
// thousands of acquires it then refuses at once never reached Redis and
// leave no lease to clean up. Only the calls that went out may have added
// one.
func TestConcurrencyOrphansOnlyFromSentCalls(t *testing.T) {
	rs, s := ownStore(t, Config{Timeout: 20 * time.Millisecond, BreakerThreshold: 3, BreakerCooldown: time.Minute})
	l := newConcurrency(t, s, ConcurrencyConfig{Key: "orphans", Limit: 5, TTL: time.Hour, Failure: FailClosed})
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	defer rs.Resume()
	before := s.Stats().Calls
	for range 10000 {
		if _, err := l.TryAcquire(); err == nil {
			t.Fatal("admitted with Redis paused and FailClosed")
		}
	}
	sent := s.Stats().Calls - before
	l.mu.Lock()
	n := len(l.orphans)
	l.mu.Unlock()
	if st := s.Stats(); st.Breaker != BreakerOpen || st.BreakerRejects == 0 {
		t.Fatalf("breaker %v with %d rejects: the test needs it open", st.Breaker, st.BreakerRejects)
	}
	if sent == 0 || n > int(sent) {
		t.Fatalf("%d orphans from %d calls that went to Redis (10000 acquires)", n, sent)
	}
	t.Logf("10000 acquires, %d sent, %d orphans", sent, n)
}

// A backlog of orphans is removed orphanBatch at a time in one ZREM after
// the renewal: each renewal costs at most two round trips, the held lease
// is renewed every time, and the orphans leave the set.
func TestConcurrencyOrphansBatched(t *testing.T) {
	s := newStore(t, Config{Timeout: time.Second})
	const key, backlog = "batched", 2500
	l := newConcurrency(t, s, ConcurrencyConfig{Key: key, Limit: 5, TTL: time.Hour})
	p, err := l.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	// Leases added by acquires whose answers were lost.
	zs := make([]redis.Z, backlog)
	for i := range zs {
		id := "lost:" + strconv.Itoa(i)
		zs[i] = redis.Z{Score: 1e15, Member: id}
		l.orphan(lease{set: l.set, id: id})
	}
	if err := s.Client().ZAdd(t.Context(), l.set, zs...).Err(); err != nil {
		t.Fatal(err)
	}
	rounds := 0
	for {
		l.mu.Lock()
		left := len(l.orphans)
		l.mu.Unlock()
		if left == 0 {
			break
		}
		if rounds++; rounds > (backlog+orphanBatch-1)/orphanBatch {
			t.Fatalf("%d orphans left after %d renewals", left, rounds-1)
		}
		before := s.Stats().Calls
		l.renewOnce()
		if c := s.Stats().Calls - before; c > 2 {
			t.Fatalf("renewal %d took %d round trips with %d orphans", rounds, c, left)
		}
		if l.LimiterStats().Lost != 0 {
			t.Fatal("the held lease was lost")
		}
	}
	if n := leaseCount(t, s, key); n != 1 {
		t.Fatalf("%d leases left, want the held one", n)
	}
	p.Release(sluice.Success, 0)
	if n := leaseCount(t, s, key); n != 0 {
		t.Fatalf("%d leases after release", n)
	}
}

// The orphan list keeps its cap, also when a removal fails and its batch
// goes back.
func TestConcurrencyOrphansCapped(t *testing.T) {
	s, err := Open(srv.URL(), Config{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := newConcurrency(t, s, ConcurrencyConfig{Key: "capped", Limit: 5, TTL: time.Hour})
	for i := range maxOrphans + 10 {
		l.orphan(lease{set: l.set, id: "o:" + strconv.Itoa(i)})
	}
	s.Close() // the removal fails: the batch goes back
	l.renewOnce()
	l.orphan(lease{set: l.set, id: "late"})
	if n := len(l.orphans); n != maxOrphans {
		t.Fatalf("%d orphans, cap %d", n, maxOrphans)
	}
}

// A call that times out while queued for the pipeline is never sent, so
// it leaves no orphan; and every lease in Redis is then held or orphaned,
// none leaks for a TTL unaccounted. One flusher with room for one call:
// with Redis paused, the first call goes out and the rest time out queued.
func TestConcurrencyUnsentCallsNeverSent(t *testing.T) {
	rs, s := ownStore(t, Config{Timeout: 20 * time.Millisecond, BreakerThreshold: 1000, Pipelines: 1, MaxBatch: 1})
	s.pending.Add(1) // never 0: every call through the one flusher, in order
	const key = "unsent"
	l := newConcurrency(t, s, ConcurrencyConfig{Key: key, Limit: 1000, TTL: time.Hour, Failure: FailClosed})
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if _, err := l.TryAcquire(); err == nil {
				t.Error("admitted with Redis paused and FailClosed")
			}
		})
	}
	wg.Wait()
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	// This call goes through the flusher after every earlier one was sent
	// and answered, or skipped.
	var p sluice.Permit
	var err error
	for i := 0; ; i++ {
		if p, err = l.TryAcquire(); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("Redis does not answer after resume: %v", err)
		}
	}
	defer p.Release(sluice.Success, 0)
	l.mu.Lock()
	orphans := len(l.orphans)
	l.mu.Unlock()
	n := leaseCount(t, s, key)
	if orphans == 0 || orphans >= 40 {
		t.Fatalf("%d orphans of 40 failed acquires: want the sent ones only, at least one", orphans)
	}
	if n-1 > int64(orphans) {
		t.Fatalf("%d leases in Redis besides the held one, %d orphaned: a call given up was sent", n-1, orphans)
	}
	t.Logf("40 acquires with Redis paused: %d orphaned, %d leases besides the held one", orphans, n-1)
}
