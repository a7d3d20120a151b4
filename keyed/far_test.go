package keyed_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

const year = 365 * 24 * time.Hour

// farBuckets returns Buckets at 1e9 tokens/s, burst 10, whose keys share one
// shard (so one time base), with key a drained and key b down to 6 tokens at
// t0, and a rate.Bucket in a's state for reference. At 1e9/s a word reaches
// ±39 h from its shard's base. No key is evicted: an evicted key reads full,
// which would hide what a far time did to it.
func farBuckets(t *testing.T, t0 time.Time) (*keyed.Buckets, *rate.Bucket) {
	t.Helper()
	cfg := rate.Config{Rate: 1e9, Burst: 10}
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: cfg, MaxKeys: 4, IdleTimeout: 1000 * time.Hour})
	ref, err := rate.NewBucket(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if !b.AllowAt(t0, "a") || !ref.AllowAt(t0, 1) {
			t.Fatal("a full bucket rejected")
		}
	}
	for range 4 {
		b.AllowAt(t0, "b")
	}
	return b, ref
}

// A read at any time changes nothing, and is exact. A far one used to move
// the shard's base there, and every word that did not fit relative to it
// came back wrong by the distance: one look 72 h ahead left key a, drained
// 3 ns before, 33 h in debt (-1.2e14 tokens instead of 3), and b with it.
func TestBucketsFarReadChangesNothing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b, ref := farBuckets(t, t0)
	for _, d := range []time.Duration{72 * time.Hour, -72 * time.Hour, 200 * year, -100 * year, 40 * time.Hour} {
		at := t0.Add(d)
		if got, want := b.TokensAt(at, "a"), ref.TokensAt(at); got != want {
			t.Errorf("TokensAt(t0 + %v, a) = %v, want %v as rate.Bucket", d, got, want)
		}
		if got := b.TokensAt(t0.Add(3), "a"); got != 3 {
			t.Errorf("after TokensAt(t0 + %v): a has %v tokens 3 ns after it was drained, want 3", d, got)
		}
		if got := b.TokensAt(t0.Add(3), "b"); got != 9 {
			t.Errorf("after TokensAt(t0 + %v): b has %v tokens 3 ns later, want 9", d, got)
		}
	}
	if n, _ := b.RemainingAt(t0.Add(72*time.Hour), "a"); n != 10 {
		t.Errorf("RemainingAt(t0+72h, a) = %d, want 10", n)
	}
	if got := b.TokensAt(t0.Add(3), "a"); got != 3 {
		t.Errorf("after RemainingAt 72 h ahead: a has %v tokens 3 ns after it was drained, want 3", got)
	}
}

// Admissions at times further from the shard's base than a word reaches keep
// the keys exact wherever a word can: a refusal writes nothing; an admission
// that must move the base carries every key whose word fits, and a key whose
// word does not (its bucket is full at every time the new base reaches) is
// kept as a new key, full, never in debt. Moving every word first,
// saturated, turned a refusal 72 h back into 7 free tokens for a and 1 for
// b, an admission of another key 72 h ahead left a and b 33 h in debt at
// t0, and a's own drain 72 h ahead read back at t0 as 39 h of debt, not 72.
func TestBucketsFarAdmissionsKeepKeysExact(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	back, ahead := t0.Add(-72*time.Hour), t0.Add(72*time.Hour)
	t.Run("refusal", func(t *testing.T) {
		b, ref := farBuckets(t, t0)
		if b.AllowAt(back, "a") || ref.AllowAt(back, 1) {
			t.Fatal("a admitted 72 h before it was drained")
		}
		if got := b.TokensAt(t0.Add(3), "a"); got != 3 {
			t.Errorf("after a refusal 72 h back: a has %v tokens 3 ns after the drain, want 3", got)
		}
		if got := b.TokensAt(t0.Add(3), "b"); got != 9 {
			t.Errorf("after a refusal 72 h back: b has %v tokens 3 ns later, want 9", got)
		}
	})
	t.Run("another key", func(t *testing.T) {
		b, _ := farBuckets(t, t0)
		if !b.AllowAt(ahead, "c") {
			t.Fatal("a new key rejected 72 h later")
		}
		// a's and b's words, 72 h before the new base, are beyond a
		// word's reach: they are full at every time from t0+33h on, and
		// read full (as new keys) before, where a was in fact 3 tokens
		// short: never less.
		if got := b.TokensAt(t0.Add(3), "a"); got < 3 {
			t.Errorf("after another key's admission 72 h ahead: a has %v tokens 3 ns after the drain, want at least 3", got)
		}
		if got := b.TokensAt(t0.Add(3), "b"); got < 9 {
			t.Errorf("after another key's admission 72 h ahead: b has %v tokens 3 ns later, want at least 9", got)
		}
		if !b.AllowAt(t0.Add(3), "a") {
			t.Error("a rejected at t0 + 3 ns")
		}
	})
	t.Run("own drain", func(t *testing.T) {
		b, ref := farBuckets(t, t0)
		for range 10 {
			if !b.AllowAt(ahead, "a") || !ref.AllowAt(ahead, 1) {
				t.Fatal("a not full 72 h after it was drained")
			}
		}
		if b.AllowAt(ahead, "a") {
			t.Fatal("a admitted beyond its burst")
		}
		for _, at := range []time.Time{ahead.Add(5), t0, back, t0.Add(200 * year)} {
			if got, want := b.TokensAt(at, "a"), ref.TokensAt(at); got != want {
				t.Errorf("after a's drain 72 h later: TokensAt(t0 + %v, a) = %v, want %v as rate.Bucket", at.Sub(t0), got, want)
			}
		}
	})
}

// One key, alone in its shard, decides and reads exactly as its own
// rate.Bucket at times jumping ±100 h and read ±200 h away: far beyond a
// word's reach at the finer rates, where the shard's base must move back
// and forth. (The old code failed it at every rate here but 10/s.)
func TestBucketsMatchRateBucketFarTimes(t *testing.T) {
	for _, cfg := range []rate.Config{{Rate: 1e9, Burst: 10}, {Rate: 1e12, Burst: 1000}, {Rate: 2e13, Burst: 3}, {Rate: 10, Burst: 5}} {
		t.Run(fmt.Sprintf("rate=%g", cfg.Rate), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			kb := mustBuckets(t, keyed.BucketsConfig{Bucket: cfg, MaxKeys: 4})
			ref, err := rate.NewBucket(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1_700_000_000, 0)
			now := t0
			for i := range 20_000 {
				switch rng.IntN(20) {
				case 0:
					now = t0.Add(time.Duration(rng.Int64N(int64(200*time.Hour))) - 100*time.Hour)
				case 1:
					now = now.Add(time.Duration(rng.IntN(1000)))
				}
				if rng.IntN(3) == 0 {
					at := t0.Add(time.Duration(rng.Int64N(int64(400*time.Hour))) - 200*time.Hour)
					if got, want := kb.TokensAt(at, "a"), ref.TokensAt(at); got != want {
						t.Fatalf("step %d: TokensAt(t0 + %v) = %v, want %v as rate.Bucket", i, at.Sub(t0), got, want)
					}
					continue
				}
				if got, want := kb.AllowAt(now, "a"), ref.AllowAt(now, 1); got != want {
					t.Fatalf("step %d: AllowAt(t0 + %v) = %v, want %v as rate.Bucket", i, now.Sub(t0), got, want)
				}
			}
		})
	}
}

// Takes decided away from the shard's base (the key not full then, so its
// word stays in that base) race with each other and with takes at the
// base: every token is taken once.
func TestBucketsFarTakesUnderContention(t *testing.T) {
	const burst = 1000 // at 1e12/s a base converts ±34 s, a word reaches ±137 s
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1e12, Burst: burst}, MaxKeys: 4})
	t1 := time.Unix(1_700_000_000, 0)
	for range burst / 2 {
		b.AllowAt(t1, "hot")
	}
	later := t1.Add(60 * time.Second)
	b.AllowAt(later, "x") // moves the base 60 s from hot's word
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 200 {
				if b.AllowAt(t1, "hot") {
					admitted.Add(1)
				}
				b.AllowAt(later, "x"+strconv.Itoa(g%2))
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != burst/2 {
		t.Fatalf("admitted %d at t1, want the %d tokens left", got, burst/2)
	}
	if got := b.TokensAt(t1, "hot"); got != 0 {
		t.Fatalf("hot has %v tokens at t1, want 0", got)
	}
}
