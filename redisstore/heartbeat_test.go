package redisstore

import (
	"testing"
	"time"
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
