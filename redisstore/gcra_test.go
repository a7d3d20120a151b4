package redisstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// runBoth runs one decision of b on key with gcraScript, and on key2 with
// gcraBatchScript as the second decision of a batch (after one on a
// scratch key), and returns both parsed replies.
func runBoth(t *testing.T, s *Store, b *Buckets, key, key2 string, n, k int, maxWaitUs int64) (one, batch gcraReply) {
	t.Helper()
	args := []any{b.t, b.burst, n, k, maxWaitUs}
	v, err := gcraScript.Run(t.Context(), s.client, []string{key}, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	if one, err = parseGCRA(v); err != nil {
		t.Fatal(err)
	}
	scratch := fmt.Sprintf("sluice:test:{scratch-%d}", time.Now().UnixNano())
	v, err = gcraBatchScript.Run(t.Context(), s.client, []string{scratch, key2}, append(append([]any{}, args...), args...)...).Result()
	if err != nil {
		t.Fatal(err)
	}
	arr, err := splitReply(v, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := element(arr[1])
	if r.err != nil {
		t.Fatal(r.err)
	}
	if batch, err = parseGCRA(r.val); err != nil {
		t.Fatal(err)
	}
	return one, batch
}

// The one-key script (every decision not merged with others) and the
// batch script (merged decisions) are two texts of one arithmetic: they
// give the same answers. On a fresh key every field is known in advance
// (the TAT starts at now, so nothing depends on when Redis runs it), for
// each branch: admitted, admitted after a wait, the batched mode's larger
// grant, rejected. On a used key the times depend on the microseconds
// between the two calls, so a sequence compares the rest: allowed,
// remaining, granted.
func TestGCRAScriptsAgree(t *testing.T) {
	s := newStore(t, Config{Timeout: time.Second})
	// 10 tokens/s: a token every 100,000 µs, a burst of 5.
	b := newBuckets(t, s, RateConfig{Rate: 10, Burst: 5})
	fresh := []struct {
		name      string
		n, k      int
		maxWaitUs int64
		want      gcraReply
	}{
		{"one token", 1, 1, 0, gcraReply{allowed: true, remaining: 4, resetUs: 100000, granted: 1}},
		{"the burst", 5, 5, 0, gcraReply{allowed: true, remaining: 0, resetUs: 500000, granted: 5}},
		{"over the burst", 6, 6, 0, gcraReply{allowed: false, remaining: 5, waitUs: 100000, resetUs: 0}},
		{"over the burst, waiting", 6, 6, 100000, gcraReply{allowed: true, remaining: 0, waitUs: 100000, resetUs: 600000, granted: 6}},
		{"batched", 1, 3, 0, gcraReply{allowed: true, remaining: 2, resetUs: 300000, granted: 3}},
		{"batched, capped by the tokens there", 2, 8, 0, gcraReply{allowed: true, remaining: 0, resetUs: 500000, granted: 5}},
	}
	for i, c := range fresh {
		key, key2 := fmt.Sprintf("sluice:test:{one-%d}", i), fmt.Sprintf("sluice:test:{batch-%d}", i)
		one, batch := runBoth(t, s, b, key, key2, c.n, c.k, c.maxWaitUs)
		if one != c.want || batch != c.want {
			t.Errorf("%s: gcraScript %+v, gcraBatchScript %+v, want %+v", c.name, one, batch, c.want)
		}
	}

	// A token every 10^11 µs (28 h), a burst of 10: the microseconds
	// between calls do not move the token counts.
	slow := newBuckets(t, s, RateConfig{Rate: 1e-5, Burst: 10})
	steps := []struct {
		n, k      int
		maxWaitUs int64
		allowed   bool
		remaining int64
		granted   int64
	}{
		{3, 3, 0, true, 7, 3},
		{4, 4, 0, true, 3, 4},
		{1, 5, 0, true, 0, 3}, // batched: takes the 3 left
		{1, 1, 0, false, 0, 0},
		{2, 2, 1e12, true, 0, 2}, // reserved ahead, 2·10^11 µs of wait
		{1, 1, 0, false, 0, 0},
	}
	for i, st := range steps {
		one, batch := runBoth(t, s, slow, "sluice:test:{one-seq}", "sluice:test:{batch-seq}", st.n, st.k, st.maxWaitUs)
		for _, r := range []gcraReply{one, batch} {
			if r.allowed != st.allowed || r.remaining != st.remaining || r.granted != st.granted {
				t.Fatalf("step %d: gcraScript %+v, gcraBatchScript %+v, want allowed %v remaining %d granted %d",
					i, one, batch, st.allowed, st.remaining, st.granted)
			}
		}
		if st.maxWaitUs > 0 && (one.waitUs <= 0 || batch.waitUs <= 0) {
			t.Fatalf("step %d: a reservation ahead with no wait: %+v, %+v", i, one, batch)
		}
	}

	// A key holding another type is Redis's error, from either script.
	if err := s.client.HSet(t.Context(), "sluice:test:{hash}", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := gcraScript.Run(t.Context(), s.client, []string{"sluice:test:{hash}"}, b.t, b.burst, 1, 1, 0).Result()
	var re redis.Error
	if !errors.As(err, &re) {
		t.Errorf("gcraScript on a hash: want Redis's error, got %v", err)
	}
	v, err := gcraBatchScript.Run(t.Context(), s.client, []string{"sluice:test:{hash}", "sluice:test:{ok}"}, b.t, b.burst, 1, 1, 0, b.t, b.burst, 1, 1, 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	arr, err := splitReply(v, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r := element(arr[0]); !errors.As(r.err, &re) {
		t.Errorf("gcraBatchScript on a hash: want Redis's error for that key, got %+v", r)
	}
	if r := element(arr[1]); r.err != nil {
		t.Errorf("gcraBatchScript: the key after the hash failed too: %v", r.err)
	}
}
