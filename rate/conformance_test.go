package rate_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/limitertest"
	"github.com/sluicehq/sluice/rate"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Config{
		New: func(t *testing.T) sluice.Limiter {
			b, err := rate.NewBucket(rate.Config{Burst: 3}) // rate 0: no refill
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Capacity: 3,
		Quota:    true,
		Spends:   true,
	})
}
