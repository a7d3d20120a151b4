package redisstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func newBuckets(t testing.TB, s *Store, cfg RateConfig) *Buckets {
	t.Helper()
	b, err := NewBuckets(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A fresh bucket admits Burst at once, then rejects with a rate rejection
// whose retry-after, waited exactly, admits the next request.
func TestBucketBurstThenRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func() string
	}{{"single", srv.URL}, {"cluster", cluster.URL}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.url(), Config{Timeout: 200 * time.Millisecond}, false)
			b := newBuckets(t, s, RateConfig{Rate: 1, Burst: 5, OverLimitCache: -1})
			key := fmt.Sprintf("burst-%s-%d", tc.name, time.Now().UnixNano())
			for i := range 5 {
				r, err := b.Allow(key, 1)
				if err != nil || !r.Allowed || r.Remaining != 4-i {
					t.Fatalf("request %d: %+v %v", i, r, err)
				}
			}
			r, err := b.Allow(key, 1)
			if err != nil || r.Allowed {
				t.Fatalf("6th: %+v %v", r, err)
			}
			if r.RetryAfter <= 0 || r.RetryAfter > time.Second {
				t.Fatalf("retry-after %v, want (0, 1s]", r.RetryAfter)
			}
			time.Sleep(r.RetryAfter)
			if r2, err := b.Allow(key, 1); err != nil || !r2.Allowed {
				t.Fatalf("after waiting Retry-After %v: %+v %v", r.RetryAfter, r2, err)
			}
			_, err = b.TryAcquire(key)
			if !errors.Is(err, sluice.ErrRate) || !errors.Is(err, sluice.ErrQuota) {
				t.Fatalf("TryAcquire on empty bucket: %v", err)
			}
		})
	}
}

// The key's TTL is the time to refill: an idle bucket's key vanishes.
func TestBucketTTLIsRefillTime(t *testing.T) {
	s := newStore(t, Config{Timeout: 200 * time.Millisecond})
	b := newBuckets(t, s, RateConfig{Rate: 100, Burst: 50})
	if r, err := b.Allow("ttl", 20); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	ttl, err := s.Client().PTTL(t.Context(), "sluice:rate:{ttl}").Result()
	if err != nil {
		t.Fatal(err)
	}
	// 20 tokens at 100/s refill in 200 ms.
	if ttl <= 150*time.Millisecond || ttl > 200*time.Millisecond {
		t.Fatalf("TTL %v, want about 200ms", ttl)
	}
}

// A weighted request refused by the over-limit cache is told when its n
// tokens come, as Redis tells it, not when one does: a client that waits
// the retry-after it was given must not be refused for the same reason.
func TestCachedRejectionRetryAfterIsForN(t *testing.T) {
	s := newStore(t, Config{Timeout: time.Second})
	b := newBuckets(t, s, RateConfig{Rate: 10, Burst: 10})
	if _, err := b.TakeN("w", 10); err != nil {
		t.Fatal(err)
	}
	_, err := b.TakeN("w", 5) // Redis decides: 5 tokens in 500 ms
	fromRedis, ok := sluice.RetryAfter(err)
	if !ok {
		t.Fatalf("TakeN = %v, want a rejection with a retry-after", err)
	}
	hits := b.LimiterStats().CacheHits
	_, err = b.TakeN("w", 5) // the cache decides
	fromCache, _ := sluice.RetryAfter(err)
	if b.LimiterStats().CacheHits != hits+1 {
		t.Fatal("the second rejection did not come from the cache")
	}
	// A few ms pass between the two; one token's worth (100 ms) is what
	// the cache said before.
	if fromCache < fromRedis-50*time.Millisecond || fromCache > fromRedis+time.Millisecond {
		t.Errorf("retry-after %v from the cache, %v from Redis: want the same, less the time between", fromCache, fromRedis)
	}
}

// Allow refuses n over Burst as it refuses n under 1, naming n: a bucket
// never holds more than Burst tokens, so no retry-after would ever admit
// the request, and a caller that waited the one Redis computed would be
// refused again, for ever.
func TestAllowMoreThanBurst(t *testing.T) {
	s := newStore(t, Config{Timeout: time.Second})
	b := newBuckets(t, s, RateConfig{Rate: 10, Burst: 5, OverLimitCache: -1})
	r, err := b.Allow("over", 6)
	var ce *sluice.ConfigError
	if !errors.As(err, &ce) || ce.Field != "n" {
		t.Fatalf("Allow(6) on a burst of 5 = %+v, %v; want a config error naming n", r, err)
	}
	if n, err := s.Client().Exists(t.Context(), "sluice:rate:{over}").Result(); err != nil || n != 0 {
		t.Fatalf("the refused request reached Redis: %d keys, %v", n, err)
	}
	if r, err := b.Allow("over", 5); err != nil || !r.Allowed {
		t.Fatalf("Allow(5) on a burst of 5 = %+v, %v", r, err)
	}
}
