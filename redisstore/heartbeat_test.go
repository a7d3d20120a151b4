package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicas count each other through the heartbeat key; a replica that
// stops is no longer counted once its announcement expires (3 beats).
func TestHeartbeatCountsReplicas(t *testing.T) {
	newStore(t, Config{}) // flush
	cfg := Config{Timeout: 500 * time.Millisecond, Heartbeat: 20 * time.Millisecond}
	a := openStore(t, srv.URL(), cfg, false)
	b := openStore(t, srv.URL(), cfg, false)
	c := openStore(t, srv.URL(), cfg, false)
	waitFor := func(s *Store, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for s.Replicas() != n {
			if time.Now().After(deadline) {
				t.Fatalf("Replicas() = %d, want %d", s.Replicas(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(a, 3)
	c.Close()
	b.Close()
	waitFor(a, 1)
	if st := a.Stats(); st.Replicas != 1 {
		t.Fatalf("Stats.Replicas = %d", st.Replicas)
	}
}

// A count that dips though no replica left does not lower Replicas (and
// with it raise FailLocal's local share): here Redis loses the set, as a
// restart without persistence does, and the store's next count is itself
// alone until the others announce again.
func TestHeartbeatRidesOutADip(t *testing.T) {
	const key = "{sluice}:replicas-dip"
	s := openStore(t, srv.URL(), Config{Timeout: 500 * time.Millisecond, Heartbeat: 50 * time.Millisecond, HeartbeatKey: key}, false)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := t.Context()
	defer c.Del(context.Background(), key)
	others := func() { // two replicas announcing, with their own clients
		far := float64(time.Now().Add(time.Hour).UnixMilli())
		if err := c.ZAdd(ctx, key, redis.Z{Score: far, Member: "b"}, redis.Z{Score: far, Member: "c"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("5 s and still not %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	others()
	waitUntil("3 replicas", func() bool { return s.Replicas() == 3 })
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil("announced alone", func() bool { return c.ZCard(ctx, key).Val() == 1 })
	others()
	for end := time.Now().Add(4 * 50 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n := s.Replicas(); n != 3 {
			t.Fatalf("Replicas() = %d after Redis lost the set, want 3", n)
		}
	}
}

// The set lives as long as its longest-lived announcement: a replica with
// a shorter heartbeat (a rolling change of Config.Heartbeat) announcing
// after one with a longer must not cut the set's life to its own TTL, or
// the set, and the longer-lived replica's announcement with it, vanishes
// once the short one stops.
func TestHeartbeatKeepsTheLongestAnnouncement(t *testing.T) {
	const key = "{sluice}:replicas-mixed"
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := t.Context()
	defer c.Del(context.Background(), key)
	if err := heartbeatScript.Run(ctx, c, []string{key}, "slow", time.Minute.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := heartbeatScript.Run(ctx, c, []string{key}, "fast", 30).Err(); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < 50*time.Second {
		t.Fatalf("set TTL %v after a 30ms announcement, with one live for another minute", ttl)
	}
}

// A store that closes withdraws its announcement at once: the others'
// next count leaves it out, instead of counting it until it expires.
func TestHeartbeatWithdrawsOnClose(t *testing.T) {
	const key = "{sluice}:replicas-withdraw"
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	defer c.Del(context.Background(), key)
	// A heartbeat of a minute: the announcement would outlive the test.
	s := openStore(t, srv.URL(), Config{Timeout: 500 * time.Millisecond, Heartbeat: time.Minute, HeartbeatKey: key}, false)
	deadline := time.Now().Add(5 * time.Second)
	for c.ZCard(t.Context(), key).Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("5 s and the store has not announced itself")
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	if n := c.ZCard(t.Context(), key).Val(); n != 0 {
		t.Fatalf("%d announcements left after Close, want 0", n)
	}
}
