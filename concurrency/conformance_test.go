package concurrency_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/limitertest"
)

func TestConformance(t *testing.T) {
	for _, cfg := range []concurrency.Config{
		{Limit: 3},
		{Limit: 3, MaxQueue: 2},
		{Limit: 3, MaxQueue: 2, Discipline: concurrency.LIFO},
		{Limit: 3, MaxQueue: 2, Discipline: concurrency.CoDel},
		{Limit: 3, MaxQueue: 2, Discipline: concurrency.AdaptiveLIFO},
	} {
		t.Run(cfg.Discipline.String()+"/queue="+map[bool]string{true: "yes", false: "no"}[cfg.MaxQueue > 0], func(t *testing.T) {
			limitertest.Run(t, limitertest.Config{
				New: func(t *testing.T) sluice.Limiter {
					l, err := concurrency.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				Capacity: 3,
			})
		})
	}
}
