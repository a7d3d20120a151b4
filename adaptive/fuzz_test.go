package adaptive

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// FuzzObserve builds each algorithm from arbitrary limits and feeds it
// arbitrary samples: a constructor either refuses the config with
// sluice.ErrInvalidConfig or returns an algorithm whose limit stays within
// [MinLimit, MaxLimit] whatever it is told, without panicking.
func FuzzObserve(f *testing.F) {
	f.Add(0, 0, 0, int64(50*time.Millisecond), 10, uint8(0), int64(time.Second), []byte{1, 2, 3, 200, 7})
	f.Add(5, 1, 7, int64(2*time.Second), 7, uint8(1), int64(0), []byte{0, 0, 255, 3})
	f.Add(math.MaxInt, 0, math.MaxInt, int64(-1), -3, uint8(3), int64(math.MaxInt64), []byte{9})
	f.Fuzz(func(t *testing.T, initial, minL, maxL int, latency int64, inFlight int, outcome uint8, step int64, script []byte) {
		algs := map[string]func() (Algorithm, error){
			"aimd": func() (Algorithm, error) {
				return NewAIMD(AIMDConfig{InitialLimit: initial, MinLimit: minL, MaxLimit: maxL})
			},
			"vegas": func() (Algorithm, error) {
				return NewVegas(VegasConfig{InitialLimit: initial, MinLimit: minL, MaxLimit: maxL})
			},
			"gradient2": func() (Algorithm, error) {
				return NewGradient2(Gradient2Config{InitialLimit: initial, MinLimit: minL, MaxLimit: maxL})
			},
		}
		for name, build := range algs {
			alg, err := build()
			if err != nil {
				continue // the config tests check the errors
			}
			lo, hi := alg.Limit(), alg.Limit()
			if minL > 0 {
				lo = minL
			}
			if maxL > 0 {
				hi = maxL
			}
			now := time.Unix(0, 0)
			for i, b := range script {
				s := Sample{
					Latency:  time.Duration(latency) * time.Duration(b) / 16,
					InFlight: inFlight + int(b%8),
					Outcome:  sluice.Outcome((int(outcome) + i) % 4),
				}
				now = now.Add(time.Duration(step) * time.Duration(b))
				l := alg.Observe(now, s)
				if l != alg.Limit() || l < 1 || (minL > 0 && l < lo) || (maxL > 0 && l > hi) {
					t.Fatalf("%s: limit %d (Limit() %d) after %+v, want within [%d, %d]", name, l, alg.Limit(), s, lo, hi)
				}
			}
		}
	})
}
