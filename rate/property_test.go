package rate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Random admissions at random times, at rates from 1e-9/s to 1e12/s and
// bursts from 1 to 2^31:
//   - over every window from one admission to a later one, the tokens
//     taken are at most Burst + Rate·window;
//   - against a token bucket in float64 that follows the bucket's
//     decisions, no admission finds the model short by more than one token,
//     and no refusal finds it holding n tokens and one more (allowing for
//     the documented precision of the rate, 2^-17, over the time the model
//     has not been full);
//   - a caller that retries exactly the Delay of a failed reservation is
//     admitted.
//
// Half the refusals retry exactly when the bucket says the tokens are
// there, where a bucket faster than its rate shows at once; random times
// alone rarely land between the bucket's time and the model's.
func TestAdmissionsMatchAFloatModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	rates := []float64{1e-9, 1e-3, 1, 3, 7, 1e3 / 7, 1e6 / 3, 7e8, 1e9 / 1.4, 2.5e9, 1e12, 1e12 / 7}
	bursts := []int{1, 2, 10, 1000, 1 << 20, 1 << 31}
	for range 200 {
		rates = append(rates, math.Pow(10, rng.Float64()*21-9))
	}
	for _, r := range rates {
		for _, burst := range bursts {
			if ValidFill(r, burst) != nil || r*float64(MaxFill)/1e9 < float64(burst) {
				continue // refused, or never refills: nothing to compare
			}
			admissionsMatchModel(t, rng, r, burst)
		}
	}
}

func admissionsMatchModel(t *testing.T, rng *rand.Rand, r float64, burst int) {
	t.Helper()
	b := mustBucket(t, Config{Rate: r, Burst: burst})
	interval := 1e9 / r // ns a token
	var (
		now       int64 // ns from t0
		model     = float64(burst)
		sinceFull float64 // ns the model has not been full
		taken     []float64
		times     []int64
		retry     time.Duration // > 0: a refusal's Delay, to wait exactly
		retryN    int
	)
	for range 400 {
		n := 1 + rng.IntN(burst)
		if rng.IntN(2) == 0 {
			n = burst // drain it: the rate alone then decides
		}
		step := int64(math.Min(rng.Float64()*float64(n)*interval*1.5, 1e17))
		mustAdmit := retry > 0
		if mustAdmit {
			step, n = int64(retry), retryN
		}
		retry = 0
		if now += step; now > 1e18 {
			break
		}
		at := t0.Add(time.Duration(now))
		model += float64(step) / interval
		sinceFull += float64(step)
		if model >= float64(burst) {
			model, sinceFull = float64(burst), 0
		}
		if b.AllowAt(at, n) {
			if model < float64(n)-1 {
				t.Fatalf("rate %g burst %d: admitted %d at %v with %.6g tokens in the model",
					r, burst, n, time.Duration(now), model)
			}
			model -= float64(n)
			taken, times = append(taken, float64(n)), append(times, now)
			continue
		}
		if mustAdmit {
			t.Fatalf("rate %g burst %d: refused %d after waiting exactly the Delay of a refusal",
				r, burst, n)
		}
		if slack := 1 + r*sinceFull/1e9/(1<<17); model >= float64(n)+slack {
			t.Fatalf("rate %g burst %d: refused %d at %v with %.6g tokens in the model",
				r, burst, n, time.Duration(now), model)
		}
		if rng.IntN(2) == 0 {
			if res, ok := b.ReserveAt(at, n, 0); !ok && res.Delay() > 0 {
				retry, retryN = res.Delay(), n
			}
		}
	}
	for i := range taken {
		sum := 0.0
		for j := i; j < len(taken); j++ {
			sum += taken[j]
			if bound := float64(burst) + r*float64(times[j]-times[i])/1e9; sum > bound*(1+1e-12) {
				t.Fatalf("rate %g burst %d: %v tokens in %v, bound %.12g",
					r, burst, sum, time.Duration(times[j]-times[i]), bound)
			}
		}
	}
}
