package rate

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
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

// SetLimits checks the pair as NewBucket does, naming the field, and a
// refused pair changes nothing: neither field, nor the tokens.
func TestSetLimitsRefusedChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
		field string
	}{
		{-1, 5, "Config.Rate"},
		{math.NaN(), 5, "Config.Rate"},
		{math.Inf(-1), 5, "Config.Rate"},
		{-1, -1, "Config.Rate"}, // the rate first
		{10, -1, "Config.Burst"},
		{10, 2e10, "Config.Burst"}, // 63 years to fill
		{1e-9, 2, "Config.Burst"},  // 63 years too
		{1e19, math.MaxInt, "Config.Burst"},
	} {
		b := mustBucket(t, Config{Rate: 10, Burst: 20})
		b.AllowAt(t0, 7)
		at := t0.Add(100 * time.Millisecond)
		before, tokens := b.Config(), b.TokensAt(at)
		for _, set := range []func() error{
			func() error { return b.SetLimits(tc.rate, tc.burst) },
			func() error { return b.SetLimitsAt(at, tc.rate, tc.burst) },
		} {
			err := set()
			var ce *sluice.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, sluice.ErrInvalidConfig) {
				t.Errorf("SetLimits(%v, %d) = %v, want a ConfigError on %s", tc.rate, tc.burst, err, tc.field)
			}
			if got := b.Config(); got != before {
				t.Errorf("SetLimits(%v, %d) refused, but the config went from %+v to %+v", tc.rate, tc.burst, before, got)
			}
			if got := b.TokensAt(at); got != tokens {
				t.Errorf("SetLimits(%v, %d) refused, but the tokens went from %v to %v", tc.rate, tc.burst, tokens, got)
			}
		}
	}
}

// Any valid pair follows any other in one call, where SetRate and SetBurst
// each refuse the step that the other field as it stands makes invalid.
func TestSetLimitsNeedsNoOrder(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1, Burst: 1_000_000})
	if err := b.SetRateAt(t0, 1e-6); err == nil {
		t.Fatal("SetRate(1e-6) at burst 1e6 (3e4 years to fill) accepted: the test no longer shows the order problem")
	}
	if err := b.SetLimitsAt(t0, 1e-6, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.Config(); got.Rate != 1e-6 || got.Burst != 1 {
		t.Fatalf("config %+v, want rate 1e-6 burst 1", got)
	}
	if got := b.TokensAt(t0); got != 1 {
		t.Fatalf("%v tokens, want the full 1e6 capped at the new burst, 1", got)
	}
	if err := b.SetBurstAt(t0, 1_000_000); err == nil {
		t.Fatal("SetBurst(1e6) at rate 1e-6 accepted")
	}
	if err := b.SetLimitsAt(t0, 1, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(t0); got != 1 {
		t.Fatalf("%v tokens after raising the burst, want the 1 it had: a higher burst grants nothing", got)
	}
}

// SetLimits carries the tokens as the two setters do: kept, capped at the
// new burst, a debt kept and repaid at the new rate.
func TestSetLimitsCarriesTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 10, Burst: 20})
		if err := b.SetLimits(100, 8); err != nil { // full: 20 capped at 8
			t.Fatal(err)
		}
		if got := b.Tokens(); got != 8 {
			t.Fatalf("%v tokens, want 8", got)
		}
		// Into a debt of 4 tokens, which the new rate repays.
		if !b.AllowN(8) {
			t.Fatal("AllowN(8) with 8 tokens refused")
		}
		if _, ok := b.Reserve(4, time.Second); !ok {
			t.Fatal("Reserve(4) at 100/s within 1 s refused")
		}
		if err := b.SetLimits(2, 10); err != nil {
			t.Fatal(err)
		}
		if got := b.Tokens(); got != -4 {
			t.Fatalf("%v tokens after SetLimits, want the debt kept, -4", got)
		}
		time.Sleep(3 * time.Second)
		if got := b.Tokens(); got != 2 {
			t.Fatalf("%v tokens 3 s later at 2/s, want 2", got)
		}
		time.Sleep(time.Minute)
		if got := b.Tokens(); got != 10 {
			t.Fatalf("%v tokens a minute later, want the new burst, 10", got)
		}
	})
}

// One SetLimitsAt leaves the tokens the two setters leave, in the order
// that is valid for them: random pairs, drained to random depths.
func TestSetLimitsAsTwoSetters(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for range 2000 {
		r1, r2 := math.Pow(10, rng.Float64()*8-3), math.Pow(10, rng.Float64()*8-3)
		b1, b2 := 1+rng.IntN(1e6), 1+rng.IntN(1e6)
		if ValidFill(r1, b1) != nil || ValidFill(r2, b2) != nil {
			continue
		}
		one, two := mustBucket(t, Config{Rate: r1, Burst: b1}), mustBucket(t, Config{Rate: r1, Burst: b1})
		now := t0
		n := rng.IntN(b1 + 1)
		one.ReserveAt(now, n, time.Duration(math.MaxInt64))
		two.ReserveAt(now, n, time.Duration(math.MaxInt64))
		now = now.Add(time.Duration(rng.Float64() * float64(b1) / r1 * 1e9))
		if err := one.SetLimitsAt(now, r2, b2); err != nil {
			t.Fatalf("(%g, %d) to (%g, %d): %v", r1, b1, r2, b2, err)
		}
		var err error
		if r2 < r1 {
			err = errors.Join(two.SetBurstAt(now, b2), two.SetRateAt(now, r2))
		} else {
			err = errors.Join(two.SetRateAt(now, r2), two.SetBurstAt(now, b2))
		}
		if err != nil {
			t.Fatalf("(%g, %d) to (%g, %d) in two steps: %v", r1, b1, r2, b2, err)
		}
		if one.Config() != two.Config() {
			t.Fatalf("configs %+v and %+v", one.Config(), two.Config())
		}
		got, want := one.TokensAt(now), two.TokensAt(now)
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("(%g, %d) to (%g, %d): %.17g tokens, %.17g with SetRate and SetBurst", r1, b1, r2, b2, got, want)
		}
	}
}

// While SetLimits swaps between two pairs, every reader sees one of them,
// never the rate of one with the burst of the other.
func TestSetLimitsIsOneStep(t *testing.T) {
	b := mustBucket(t, Config{Rate: 10, Burst: 20})
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				b.Allow()
				if c := b.Config(); c != (Config{Rate: 10, Burst: 20}) && c != (Config{Rate: 20, Burst: 10}) {
					t.Errorf("a reader saw %+v, half of each change", c)
					return
				}
			}
		})
	}
	for i := range 20000 {
		r, n := 20.0, 10
		if i%2 == 1 {
			r, n = 10, 20
		}
		if err := b.SetLimits(r, n); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}
