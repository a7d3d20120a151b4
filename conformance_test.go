package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/limitertest"
	"github.com/sluicehq/sluice/rate"
)

// All of a concurrency limit and a token bucket: the concurrency limit
// (first, and the smaller) is the one that fills.
func TestAllConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Config{
		New: func(t *testing.T) sluice.Limiter {
			l, err := concurrency.New(concurrency.Config{Limit: 3, MaxQueue: 1})
			if err != nil {
				t.Fatal(err)
			}
			b, err := rate.NewBucket(rate.Config{Burst: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			return sluice.All(l, b)
		},
		Capacity: 3,
	})
}

// All of a token bucket that fills first: its rejection (over quota) is
// the composition's, and a concurrency slot taken before it is given back.
func TestAllQuotaConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Config{
		New: func(t *testing.T) sluice.Limiter {
			l, err := concurrency.New(concurrency.Config{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			b, err := rate.NewBucket(rate.Config{Burst: 2})
			if err != nil {
				t.Fatal(err)
			}
			return sluice.All(l, b)
		},
		Capacity: 2,
		Quota:    true,
		Spends:   true,
	})
}
