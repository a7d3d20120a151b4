package promsluice

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/limitertest"
	"github.com/sluicehq/sluice/rate"
)

// The instrumented limiter passes the contract through, whatever it wraps.
func TestInstrumentConformance(t *testing.T) {
	t.Run("concurrency", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				l, _, err := Instrument("conformance", newConcurrency(t, concurrency.Config{Limit: 3, MaxQueue: 1}))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Capacity: 3,
		})
	})
	t.Run("rate", func(t *testing.T) {
		limitertest.Run(t, limitertest.Config{
			New: func(t *testing.T) sluice.Limiter {
				b, err := rate.NewBucket(rate.Config{Burst: 2})
				if err != nil {
					t.Fatal(err)
				}
				l, _, err := Instrument("conformance", b)
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Capacity: 2,
			Quota:    true,
			Spends:   true,
		})
	})
}
