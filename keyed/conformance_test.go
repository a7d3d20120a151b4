package keyed_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/limitertest"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// A key of Buckets, through For: a token bucket per key.
func TestBucketsConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Config{
		New: func(t *testing.T) sluice.Limiter {
			return mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Burst: 3}}).For("client")
		},
		Capacity: 3,
		Quota:    true,
		Spends:   true,
	})
}

// A key of a Map of concurrency limiters, through For.
func TestMapConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Config{
		New: func(t *testing.T) sluice.Limiter {
			m, err := keyed.New(keyed.Config[*concurrency.Limiter]{
				New: func(string) (*concurrency.Limiter, error) {
					return concurrency.New(concurrency.Config{Limit: 2, MaxQueue: 1})
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			return m.For("client")
		},
		Capacity: 2,
	})
}
