package rate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// A setter carries the tokens over as they are: a debt is neither forgiven
// nor grown, tokens neither granted nor lost, however often it runs. The
// carry rounded toward zero, so every setter forgave up to a unit of a
// debt; a controller that sets the rate every few milliseconds kept
// forgiving it.
func TestSettersKeepTokensExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for range 2000 {
		r := math.Pow(10, rng.Float64()*18-6)
		burst := []int{1, 10, 1000, 1 << 20, 1 << 31}[rng.IntN(5)]
		if ValidFill(r, burst) != nil || r*float64(MaxFill)/1e9 < float64(burst) {
			continue
		}
		b := mustBucket(t, Config{Rate: r, Burst: burst})
		fill := int64(float64(burst) / r * 1e9)
		now := t0.Add(time.Duration(rng.Int64N(fill + 1)))
		// Drain, maybe into a debt, and let a random part come back.
		b.ReserveAt(now, burst, time.Duration(math.MaxInt64))
		b.ReserveAt(now, 1+rng.IntN(burst), time.Duration(math.MaxInt64))
		now = now.Add(time.Duration(rng.Int64N(fill + 1)))
		before := b.TokensAt(now)
		for range 100 {
			if err := b.SetRateAt(now, r); err != nil {
				t.Fatal(err)
			}
		}
		if after := b.TokensAt(now); after != before {
			t.Fatalf("rate %g burst %d: %.17g tokens, %.17g after 100 SetRateAt of the same rate", r, burst, before, after)
		}
		// Another rate counts other units: the tokens go through a
		// float64 and round down, so they never grow beyond its precision.
		r2 := r * math.Pow(10, rng.Float64()*4-2)
		if ValidFill(r2, burst) != nil || r2*float64(MaxFill)/1e9 < float64(burst) {
			continue
		}
		for range 50 {
			_ = b.SetRateAt(now, r2)
			_ = b.SetRateAt(now, r)
		}
		if after := b.TokensAt(now); after > before+math.Abs(before)/(1<<50) {
			t.Fatalf("rate %g burst %d: %.17g tokens, %.17g after 50 round trips to rate %g", r, burst, before, after, r2)
		}
	}
}
