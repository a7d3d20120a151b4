package rate

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Leases are taken only by single tokens at a live time, so these tests
// run in a synctest bubble: its clock is virtual, and Sleep only moves it.

// idleBurst splits on 2 cores and up to 32: 40 times what the stripes park
// here (leasing needs 4).
func idleBurst() int { return 40 * stripes() * leaseSize }

// twins returns a bucket split into a word and stripes, as a collision on
// its word would leave it, and the same bucket unsplit.
func twins(t *testing.T, cfg Config) (split, whole *Bucket) {
	t.Helper()
	split, whole = mustBucket(t, cfg), mustBucket(t, cfg)
	s, _ := split.load()
	split.startLeasing(s)
	if split.st.Load().ls.Load() == nil {
		t.Fatal("the bucket did not split")
	}
	return split, whole
}

// A split bucket drained by single tokens (to a refusal, or into waits)
// and then left idle offers what the same bucket unsplit offers: its whole
// burst, at once. Its word tops out at Burst−P and the stripes refill only
// from it, so it offered Burst−P: on 2 cores (P = 256) Tokens was 9984 of
// 10240, AllowN and Reserve of the burst were refused, WaitN of it waited
// 2.56 s.
func TestLeaseIdleAfterDrainOffersTheBurst(t *testing.T) {
	burst := idleBurst()
	drains := map[string]func(*Bucket){
		"Allow": func(b *Bucket) {
			for b.Allow() {
			}
		},
		"Wait": func(b *Bucket) { // 16 more than the burst: 160 ms of waits
			for range burst + 16 {
				if err := b.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	type result struct {
		ok    bool
		delay time.Duration
		tk    float64
	}
	offers := map[string]func(*Bucket) result{
		"Tokens": func(b *Bucket) result { return result{ok: true, tk: b.Tokens()} },
		"AllowN": func(b *Bucket) result { return result{ok: b.AllowN(burst)} },
		"Reserve": func(b *Bucket) result {
			r, ok := b.Reserve(burst, time.Hour)
			return result{ok: ok, delay: r.Delay()}
		},
		"WaitN": func(b *Bucket) result {
			start := time.Now()
			err := b.WaitN(context.Background(), burst)
			return result{ok: err == nil, delay: time.Since(start)}
		},
	}
	for dn, drain := range drains {
		for on, offer := range offers {
			t.Run(dn+"/"+on, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					split, whole := twins(t, Config{Rate: 100, Burst: burst})
					drain(split)
					drain(whole)
					time.Sleep(time.Hour) // the bucket fills in 100 s
					got, want := offer(split), offer(whole)
					if got != want {
						t.Errorf("split bucket: %+v; the same bucket unsplit: %+v", got, want)
					}
				})
			})
		}
	}
}

// Tokens taken from the stripes count as taken when they were: a split
// bucket that was full and gave k tokens from its stripes just now offers
// what the same bucket unsplit offers, Burst−k, and no more. The split
// bucket is then in the state it would be in had the k gone an hour ago
// (word full at Burst−P, stripes P−k): nothing records when a stripe
// admitted (that would be a clock read on the path that exists to avoid
// one), so there it still offers Burst−P+H where the unsplit bucket offers
// Burst. A bucket that offered Burst there would admit k too many here.
func TestLeaseRecentStripeAdmissionsCount(t *testing.T) {
	burst := idleBurst()
	synctest.Test(t, func(t *testing.T) {
		split, whole := twins(t, Config{Rate: 100, Burst: burst})
		time.Sleep(time.Hour)
		const k = leaseSize - 1 // all from the caller's stripe
		for range k {
			if !split.Allow() || !whole.Allow() {
				t.Fatal("a full bucket refused a token")
			}
		}
		if got, want := split.Tokens(), whole.Tokens(); got != want {
			t.Errorf("Tokens = %v, unsplit %v", got, want)
		}
		if split.AllowN(burst - k + 1) {
			t.Errorf("AllowN(%d) admitted %d tokens after the bucket gave %d", burst-k+1, burst+1, k)
		}
		if got, want := split.AllowN(burst-k), whole.AllowN(burst-k); got != want {
			t.Errorf("AllowN(%d) = %v, unsplit %v", burst-k, got, want)
		}
	})
}

// Random single tokens, requests of several, reservations and idle spells
// on a bucket that splits again and again, as collisions would split it:
// over every window, the tokens taken are at most Burst + Rate·window,
// through the splits, the joins, the refusals and the idle refills.
func TestLeaseNeverAdmitsMoreThanTheBucket(t *testing.T) {
	const rate = 100.0
	burst := idleBurst()
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: rate, Burst: burst})
		start := time.Now()
		rng := rand.New(rand.NewPCG(3, 4))
		var at []float64 // one entry a token: when it may be used, in s
		take := func(n int, delay time.Duration) {
			for range n {
				at = append(at, (time.Since(start) + delay).Seconds())
			}
		}
		for range 5000 {
			if s, _ := b.load(); s.mayLease() && rng.IntN(4) == 0 {
				b.startLeasing(s)
			}
			switch rng.IntN(20) {
			case 0:
				time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Second))))
			case 1, 2:
				time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
			case 3, 4:
				if n := 1 + rng.IntN(burst); b.AllowN(n) {
					take(n, 0)
				}
			case 5, 6:
				n := 1 + rng.IntN(burst/8)
				if r, ok := b.Reserve(n, time.Second); ok {
					take(n, r.Delay())
				}
			default:
				for range rng.IntN(100) {
					if b.Allow() {
						take(1, 0)
					}
				}
			}
		}
		slices.Sort(at)
		// Tokens i..j fit iff j−i+1 <= burst + rate·(at[j]−at[i]), that
		// is (j − rate·at[j]) − (i − rate·at[i]) <= burst − 1.
		lo, worst := math.Inf(1), math.Inf(-1)
		for j, a := range at {
			f := float64(j) - rate*a
			lo = min(lo, f)
			worst = max(worst, f-lo)
		}
		if worst > float64(burst-1)+1e-6 {
			t.Errorf("a window held %.3f tokens more than Burst + Rate·window", worst-float64(burst-1))
		}
		t.Logf("%d tokens in %v; fullest window %.3f of the bound", len(at), time.Since(start), (worst+1)/float64(burst))
	})
}
