package redisstore

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/limitertest"
)

var confKey atomic.Int64

// conformanceStore opens a store for one subtest of the suite, closed when
// it ends; a generous timeout, since the suite checks the contract, not
// the failure path.
func conformanceStore(t *testing.T) *Store {
	return openStore(t, srv.URL(), Config{Timeout: 2 * time.Second}, false)
}

func uniqueKey(prefix string) string { return prefix + strconv.FormatInt(confKey.Add(1), 10) }

func TestConformance(t *testing.T) {
	t.Run("Bucket", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				// 3 tokens and one more an hour: no token comes back
				// while a subtest runs.
				return newBuckets(t, conformanceStore(t), RateConfig{Rate: 1.0 / 3600, Burst: 3}).Key(uniqueKey("conf-b"))
			},
			Capacity: 3, Quota: true, Spends: true,
		})
	})
	t.Run("Concurrency", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				return newConcurrency(t, conformanceStore(t), ConcurrencyConfig{Key: uniqueKey("conf-c"), Limit: 3})
			},
			Capacity: 3,
		})
	})
	t.Run("ConcurrencyKey", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				l := newKeyedConcurrency(t, conformanceStore(t), ConcurrencyConfig{Key: uniqueKey("conf-k"), Limit: 3})
				return l.Key("k")
			},
			Capacity: 3,
		})
	})
	t.Run("All", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				s := conformanceStore(t)
				b := newBuckets(t, s, RateConfig{Rate: 1.0 / 3600, Burst: 5}).Key(uniqueKey("conf-ab"))
				c := newConcurrency(t, s, ConcurrencyConfig{Key: uniqueKey("conf-ac"), Limit: 3})
				return sluice.All(b, c)
			},
			Capacity: 3,
		})
	})
}
