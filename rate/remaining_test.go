package rate

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/gcra"
)

// compiledRemaining is how the RateLimit field was read before Remaining:
// the bucket's Config compiled again for every reading
// (gcra.Remaining(b.Tokens(), c.Rate, c.Burst) in httplimit).
func compiledRemaining(b *Bucket, now time.Time) (int, time.Duration) {
	c := b.Config()
	return gcra.Compile(c.Rate, int64(c.Burst)).Remaining(b.TokensAt(now))
}

// Remaining reads the state's own compiled Params instead of compiling
// Config again; it must answer exactly what that answered, integer and
// duration, in every state: every rate mode (0, too slow to refill,
// sub-nanosecond intervals, Inf), full, empty, fractional tokens, debts,
// far-away times, a changed config and a bucket split into stripes.
func TestRemainingIsCompiledRemaining(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rates := []float64{
		0, 1e-300, 1 / MaxFill.Seconds() / 2, 1 / MaxFill.Seconds() * 2,
		1e-6, 0.5, 1, 2, 3, 7, 10, 1000, 1e6,
		1e9 / 3, 1e9, 3e9, 1e12, 1.6e13, 1e15, 1e18, 1e19, 1e300,
		math.MaxFloat64, Inf, math.Inf(1),
	}
	bursts := []int{0, 1, 2, 3, 7, 10, 100, 1 << 20, 1e9, 1 << 40, 1 << 50, 1 << 60}
	offsets := []time.Duration{
		0, 1, 7, 999, time.Microsecond, 142857143, 333 * time.Millisecond,
		time.Second, 1500 * time.Millisecond, time.Hour, 72 * time.Hour,
		40 * 365 * 24 * time.Hour, -time.Nanosecond, -time.Hour,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var checked, configs int
	check := func(b *Bucket, now time.Time, state string) {
		t.Helper()
		checked++
		n, reset := b.RemainingAt(now)
		wantN, wantReset := compiledRemaining(b, now)
		if n != wantN || reset != wantReset {
			t.Errorf("%+v, %s, at t0+%v: RemainingAt = %d, %v; compiled again: %d, %v (tokens %v)",
				b.Config(), state, now.Sub(t0), n, reset, wantN, wantReset, b.TokensAt(now))
		}
	}
	// checkAround reads the bucket at fixed offsets from at and at random
	// ones, in whole and fractional intervals of a token.
	checkAround := func(b *Bucket, at time.Time, state string) {
		t.Helper()
		for _, d := range offsets {
			check(b, at.Add(d), state)
		}
		c := b.Config()
		interval := 1e9 / c.Rate
		for range 8 {
			tokens := rng.Float64() * float64(c.Burst+1)
			if d := tokens * interval; d < float64(MaxFill) {
				check(b, at.Add(time.Duration(d)), state)
			}
		}
	}
	for _, r := range rates {
		for _, burst := range bursts {
			cfg := Config{Rate: r, Burst: burst}
			if cfg.validate() != nil {
				continue // a bucket NewBucket refuses has no RateLimit field
			}
			configs++
			b := mustBucket(t, cfg)
			checkAround(b, t0, "full")
			// Part of the burst, all of it (empty), then a debt of a
			// whole burst more: fractions of a token refill in between.
			for _, n := range []int{1, burst / 3, burst - burst/3 - 1} {
				if n > 0 && b.AllowAt(t0, n) {
					checkAround(b, t0, "after taking "+strconv.Itoa(n))
				}
			}
			if _, ok := b.ReserveAt(t0, burst, time.Duration(math.MaxInt64)); ok && burst > 0 {
				checkAround(b, t0, "in debt")
			}
			// A changed config carries the tokens over (carry), into a
			// state compiled for the new rate and burst.
			if b.SetRateAt(t0, r*2) == nil {
				checkAround(b, t0, "rate doubled")
			}
			if b.SetBurstAt(t0, burst/2) == nil {
				checkAround(b, t0, "burst halved")
			}
		}
	}
	var zero Bucket // rate 0, burst 0: never anything
	check(&zero, t0, "zero Bucket")
	if configs < 150 || checked < 10000 {
		t.Fatalf("%d configs, %d readings: the grid lost its cases", configs, checked)
	}
	t.Logf("%d configs, %d readings", configs, checked)
}

// A bucket split into a word and stripes (lease.go) keeps Burst−P in its
// word's Params; Remaining must answer for the whole bucket, with the
// stripes' tokens, as the compiled Config did. Leases are taken by single
// tokens at live times, so this runs in virtual time: Remaining and the
// compiled reading see the same instant.
func TestRemainingOfSplitBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, r := range []float64{1, 1000, 1e9 / 3, 1e12} {
			split, _ := twins(t, Config{Rate: r, Burst: idleBurst()})
			rng := rand.New(rand.NewPCG(3, uint64(r)))
			for i := range 100 {
				for range rng.IntN(2 * leaseSize) {
					split.Allow()
				}
				if split.st.Load().ls.Load() == nil {
					t.Fatalf("rate %v, step %d: the bucket joined its stripes; the test reads a split one", r, i)
				}
				now := time.Now()
				n, reset := split.Remaining()
				wantN, wantReset := compiledRemaining(split, now)
				if n != wantN || reset != wantReset {
					t.Fatalf("rate %v, step %d: Remaining = %d, %v; compiled again: %d, %v (tokens %v)",
						r, i, n, reset, wantN, wantReset, split.Tokens())
				}
				if n2, reset2 := split.RemainingAt(now); n2 != n || reset2 != reset {
					t.Fatalf("rate %v, step %d: RemainingAt(now) = %d, %v; Remaining = %d, %v", r, i, n2, reset2, n, reset)
				}
				time.Sleep(time.Duration(rng.IntN(int(time.Millisecond))))
			}
		}
	})
}
