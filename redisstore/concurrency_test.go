package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	renewals := func() uint64 { return l1.LimiterStats().Renewals }
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

// holdN takes n permits with acquire, from 16 goroutines.
func holdN(t *testing.T, n int, acquire func(i int) (sluice.Permit, error)) []sluice.Permit {
	t.Helper()
	var mu sync.Mutex
	var ps []sluice.Permit
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				p, err := acquire(i)
				if err != nil {
					t.Errorf("permit %d: %v", i, err)
					continue
				}
				mu.Lock()
				ps = append(ps, p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, p := range ps {
			p.Release(sluice.Success, 0)
		}
	})
	return ps
}

// Thousands of held leases are renewed in time: a renewal script call
// holds at most renewChunk leases (one call per lease set, a Lua call per
// lease, took 6.6 ms for 3000, past the default 5 ms decision timeout, on
// every renewal), and the sets with few leases go many to a round trip
// (KeyedConcurrency, one set per key: 4000 keys one round trip after
// another took 0.9 s, and leases expired while held). The store's timeout
// is generous here: this is about the renewal's shape, not the machine's
// speed under -race.
func TestManyLeasesRenewed(t *testing.T) {
	s := newStore(t, Config{Timeout: 100 * time.Millisecond})
	const ttl = 900 * time.Millisecond
	// An hour's TTL: the renewer's own ticks (every 20 min) stay out of the count of one renewal's calls.
	one := newConcurrency(t, s, ConcurrencyConfig{Key: "many", Limit: 3000, TTL: time.Hour})
	holdN(t, 3000, func(int) (sluice.Permit, error) { return one.TryAcquire() })
	keyed := newKeyedConcurrency(t, s, ConcurrencyConfig{Key: "many-keys", Limit: 1, TTL: ttl})
	holdN(t, 4000, func(i int) (sluice.Permit, error) { return keyed.TryAcquire(strconv.Itoa(i)) })
	calls := one.LimiterStats().Renewals
	one.renewOnce()
	if n := one.LimiterStats().Renewals - calls; n != 3000/renewChunk {
		t.Errorf("3000 leases renewed in %d calls, want %d of %d", n, 3000/renewChunk, renewChunk)
	}
	for start, waited := keyed.LimiterStats().Renewals, time.Duration(0); keyed.LimiterStats().Renewals < start+4*4000; waited += ttl / 10 {
		if waited > 20*ttl {
			t.Fatalf("%d renewal calls answered in %v, want 4 × 4000", keyed.LimiterStats().Renewals-start, waited)
		}
		time.Sleep(ttl / 10) // four renewals of every key: more than a TTL
	}
	for range 100 {
		if _, err := one.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("a limit of 3000 all held: TryAcquire = %v, want ErrLimit (%+v)", err, one.LimiterStats())
		}
	}
	for i := range 4000 {
		if _, err := keyed.TryAcquire(strconv.Itoa(i)); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("key %d held: TryAcquire = %v, want ErrLimit (%+v)", i, err, keyed.LimiterStats())
		}
	}
	if a, b := one.LimiterStats(), keyed.LimiterStats(); a.Lost+b.Lost != 0 {
		t.Errorf("lost %d and %d leases while held, want none", a.Lost, b.Lost)
	}
}
