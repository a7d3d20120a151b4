package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// BenchmarkRun measures the simulator itself: simulated requests per
// wall-clock second, for the overload sweep's 10× point.
func BenchmarkRun(b *testing.B) {
	for _, pc := range []struct {
		name string
		p    Policy
	}{
		{"policy=none", NonePolicy{}},
		{"policy=codel", ConcurrencyPolicy{Limit: 16, QueueConfig: QueueConfig{Queue: Unbounded, Discipline: concurrency.CoDel}}},
		{"policy=gradient2", AdaptivePolicy{Algorithm: Gradient2}},
		{"policy=token-bucket", TokenBucketPolicy{Rate: 1600, Burst: 16}},
	} {
		b.Run(pc.name, func(b *testing.B) {
			sc := Scenario{
				Seed: 1, Duration: 10 * time.Second,
				Origin:   Origin{Workers: 16, Queue: 64, Service: Dist{Kind: Exponential, Mean: 10 * time.Millisecond}},
				Load:     Load{Arrivals: PoissonArrivals, Rate: 16000, Timeout: 100 * time.Millisecond},
				Policies: []Policy{pc.p},
			}
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				res, err := Run(sc)
				if err != nil {
					b.Fatal(err)
				}
				n += res.Policies[0].Simulated
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "simulated-req/s")
		})
	}
}
