package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

func newKeyedConcurrency(t testing.TB, s *Store, cfg ConcurrencyConfig) *KeyedConcurrency {
	t.Helper()
	l, err := NewKeyedConcurrency(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func keyedLeases(t testing.TB, s *Store, name, key string) int64 {
	t.Helper()
	n, err := s.Client().ZCard(context.Background(), "sluice:conc:"+name+":{"+key+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Two replicas share a limit of 2 per key, on one node and on a Cluster
// (each key's set in its own slot): a key's third lease is refused
// whichever replica asks, other keys are not affected, and a release
// frees the slot for the other replica.
func TestKeyedConcurrencySharedPerKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func() string
	}{{"single", srv.URL}, {"cluster", cluster.URL}} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("per-key-%s-%d", tc.name, time.Now().UnixNano())
			var r [2]*KeyedConcurrency
			for i := range r {
				s := openStore(t, tc.url(), Config{Timeout: time.Second}, false)
				r[i] = newKeyedConcurrency(t, s, ConcurrencyConfig{Key: name, Limit: 2})
			}
			a1, err1 := r[0].TryAcquire("alice")
			a2, err2 := r[1].TryAcquire("alice")
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range r {
				if _, err := r[i].TryAcquire("alice"); !errors.Is(err, sluice.ErrLimit) {
					t.Fatalf("alice's third lease from replica %d: %v", i, err)
				}
			}
			var bob []sluice.Permit
			for i := range 2 {
				p, err := r[i].TryAcquire("bob")
				if err != nil {
					t.Fatalf("bob, with alice full: %v", err)
				}
				bob = append(bob, p)
			}
			if n := keyedLeases(t, r[0].s, name, "alice"); n != 2 {
				t.Fatalf("%d leases of alice in Redis, want 2", n)
			}
			a1.Release(sluice.Success, 0)
			a3, err := r[1].TryAcquire("alice")
			if err != nil {
				t.Fatalf("after a release on the other replica: %v", err)
			}
			for _, p := range append(bob, a2, a3) {
				p.Release(sluice.Success, 0)
			}
			for _, k := range []string{"alice", "bob"} {
				if n := keyedLeases(t, r[0].s, name, k); n != 0 {
					t.Fatalf("%d leases of %s after release", n, k)
				}
			}
			if st := r[1].Stats(); st.InFlight != 0 || st.Admitted != 3 || st.Rejected[sluice.ReasonLimit] != 1 {
				t.Fatalf("replica 1 stats %+v", st)
			}
		})
	}
}

// Leases of several keys held past their TTL are renewed (one round trip
// per key each TTL/3); a replica that dies holding leases loses them
// after the TTL, key by key, and the other replica gets the slots.
func TestKeyedConcurrencyRenewAndExpire(t *testing.T) {
	newStore(t, Config{}) // flush
	const ttl = 300 * time.Millisecond
	cfg := ConcurrencyConfig{Key: "renew-keyed", Limit: 1, TTL: ttl}
	s1 := openStore(t, srv.URL(), Config{Timeout: time.Second}, false)
	l1 := newKeyedConcurrency(t, s1, cfg)
	s2 := openStore(t, srv.URL(), Config{Timeout: time.Second}, false)
	l2 := newKeyedConcurrency(t, s2, cfg)
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		if _, err := l1.TryAcquire(k); err != nil {
			t.Fatal(err)
		}
	}
	// Nine renewals, three TTLs: without them every lease would be gone.
	renewals := func() uint64 { return s1.Stats().Calls }
	for start := renewals(); renewals() < start+9*uint64(len(keys)); {
		time.Sleep(ttl / 10) // waiting for the renewer's ticks
	}
	for _, k := range keys {
		if _, err := l2.TryAcquire(k); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("key %s taken while its holder runs: %v", k, err)
		}
	}
	if ls := l1.LimiterStats(); ls.Lost != 0 {
		t.Fatalf("lost %d leases", ls.Lost)
	}
	// The holder dies: no release, no renewal.
	l1.Close()
	died := time.Now()
	for _, k := range keys {
		for {
			p, err := l2.TryAcquire(k)
			if err == nil {
				p.Release(sluice.Success, 0)
				break
			}
			if time.Since(died) > ttl+time.Second {
				t.Fatalf("key %s still full %v after its holder died (TTL %v): %v", k, time.Since(died), ttl, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if el := time.Since(died); el < ttl/2 {
		t.Fatalf("slots freed %v after the holder died, before the lease could expire", el)
	}
}

// With Redis dead, FailLocal keeps ceil(Limit/N) per key in the process.
func TestKeyedConcurrencyFailLocal(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, rs.URL(), Config{Timeout: 20 * time.Millisecond}, false)
	rs.Close()
	l := newKeyedConcurrency(t, s, ConcurrencyConfig{Key: "local", Limit: 5, Failure: FailLocal, Replicas: 2})
	for _, k := range []string{"x", "y"} {
		ok := 0
		for range 5 {
			if _, err := l.TryAcquire(k); err == nil {
				ok++
			} else if !errors.Is(err, sluice.ErrLimit) {
				t.Fatalf("local rejection: %v", err)
			}
		}
		if ok != 3 {
			t.Fatalf("key %s admitted %d with Redis dead, want ceil(5/2) = 3", k, ok)
		}
	}
	if ls := l.LimiterStats(); ls.Fallbacks != 10 {
		t.Fatalf("%d fallbacks, want 10", ls.Fallbacks)
	}
}

func TestKeyedConcurrencyBadInput(t *testing.T) {
	s := newStore(t, Config{})
	if _, err := NewKeyedConcurrency(s, ConcurrencyConfig{Key: "k", Limit: 0}); !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "ConcurrencyConfig.Limit") {
		t.Fatalf("limit 0: %v", err)
	}
	l := newKeyedConcurrency(t, s, ConcurrencyConfig{Key: "k", Limit: 1})
	long := strings.Repeat("x", MaxKeyLen)
	if _, err := l.TryAcquire(long); !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "key") {
		t.Fatalf("long key: %v", err)
	}
	if st := l.Stats(); st.Admitted != 0 || st.InFlight != 0 {
		t.Fatalf("a refused key changed the stats: %+v", st)
	}
}
