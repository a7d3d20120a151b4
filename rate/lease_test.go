package rate

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// A bucket that barely refills (one token in 1000 s) and holds 10,000:
// whatever the goroutines and the stripes do, exactly 10,000 are admitted.
const (
	leaseBurst = 10000
	leaseRate  = 1e-3
)

func leasingBucket(t *testing.T) *Bucket {
	t.Helper()
	b := mustBucket(t, Config{Rate: leaseRate, Burst: leaseBurst})
	s, _ := b.load()
	b.startLeasing(s) // as the first collision on the word would
	if b.st.Load().ls.Load() == nil {
		t.Fatal("the bucket did not start leasing")
	}
	return b
}

// Splitting into a word and stripes carries the tokens over exactly.
func TestLeaseStartKeepsTokens(t *testing.T) {
	b := leasingBucket(t)
	if tk := b.Tokens(); math.Abs(tk-leaseBurst) > 0.01 {
		t.Errorf("Tokens = %v after the split, want %d", tk, leaseBurst)
	}
	if c := b.Config(); c.Burst != leaseBurst {
		t.Errorf("Config().Burst = %d, want %d", c.Burst, leaseBurst)
	}
	// The whole burst at once: the word alone cannot pay it, so the bucket
	// joins its stripes again and pays.
	if r, ok := b.Reserve(leaseBurst, 0); !ok || r.Delay() != 0 {
		t.Errorf("Reserve(burst) = %v, delay %v; want it paid at once", ok, r.Delay())
	}
	if b.st.Load().ls.Load() != nil {
		t.Error("still split after paying the burst")
	}
}

// Goroutines race on the word and the stripes; then one caller drains what
// is left (a rejection first searches every stripe). The admissions are
// exactly the burst: none lost in a stripe, none made twice.
func TestLeaseExactUnderContention(t *testing.T) {
	b := leasingBucket(t)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for b.Allow() {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	for b.Allow() {
		ok.Add(1)
	}
	if got := ok.Load(); got != leaseBurst {
		t.Errorf("%d admitted, want exactly %d", got, leaseBurst)
	}
	if s := b.Stats(); s.Admitted != leaseBurst {
		t.Errorf("Stats.Admitted = %d, want %d", s.Admitted, leaseBurst)
	}
	if tk := b.Tokens(); tk >= 1 {
		t.Errorf("Tokens = %v after draining, want < 1", tk)
	}
}

// A setter drains the stripes into the word it builds the new state from:
// tokens parked in stripes are neither lost nor kept twice.
func TestLeaseSetterDrainsStripes(t *testing.T) {
	b := leasingBucket(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if !b.Allow() {
					t.Error("rejected with tokens left")
					return
				}
			}
		})
	}
	wg.Wait()
	if err := b.SetRate(2 * leaseRate); err != nil {
		t.Fatal(err)
	}
	if b.st.Load().ls.Load() != nil {
		t.Error("the new state kept the old stripes")
	}
	if tk := b.Tokens(); math.Abs(tk-(leaseBurst-100)) > 0.01 {
		t.Errorf("Tokens = %v after the setter, want %d", tk, leaseBurst-100)
	}
	n := 100
	for b.Allow() {
		n++
	}
	if n != leaseBurst {
		t.Errorf("%d admitted in all, want %d", n, leaseBurst)
	}
}

// Cancelling a token taken from a stripe gives it back, though the word it
// would once have gone to is full; a refund still never fills the bucket
// past its burst. (The word clipped it: sluice.All lost a token each time
// a later limiter refused.)
func TestLeaseCancelGivesTheTokenBack(t *testing.T) {
	b := leasingBucket(t)
	refuse := mustBucket(t, Config{Rate: 1, Burst: 0})
	for range 3 {
		if _, err := sluice.All(b, refuse).Acquire(context.Background()); !errors.Is(err, sluice.ErrTooLarge) {
			t.Fatalf("All.Acquire = %v, want the second limiter's refusal", err)
		}
	}
	p, err := b.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tk := b.Tokens(); math.Abs(tk-(leaseBurst-1)) > 0.01 {
		t.Fatalf("Tokens = %v after Acquire, want %d", tk, leaseBurst-1)
	}
	p.Cancel()
	r, ok := b.Reserve(1, 0)
	if !ok {
		t.Fatal("Reserve refused a full bucket")
	}
	r.Cancel()
	if tk := b.Tokens(); math.Abs(tk-leaseBurst) > 0.01 {
		t.Errorf("Tokens = %v after the cancels, want %d", tk, leaseBurst)
	}
	// A full bucket given tokens it never lent stays at its burst.
	b.give(100)
	if tk := b.Tokens(); math.Abs(tk-leaseBurst) > 0.01 {
		t.Errorf("Tokens = %v after an excess refund, want %d", tk, leaseBurst)
	}
	n := 0
	for b.Allow() {
		n++
	}
	if n != leaseBurst {
		t.Errorf("%d admitted after the cancels, want %d", n, leaseBurst)
	}
}

// Goroutines take single tokens (from their stripes, leasing from the word)
// and cancel every one: the bucket ends as full as it began.
func TestLeaseConcurrentCancelsKeepTheBurst(t *testing.T) {
	b := leasingBucket(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if (g+i)%2 == 0 {
					if p, err := b.TryAcquire(); err == nil {
						p.Cancel()
					}
				} else if r, ok := b.Reserve(1, 0); ok {
					r.Cancel()
				}
			}
		})
	}
	wg.Wait()
	if tk := b.Tokens(); math.Abs(tk-leaseBurst) > 0.01 {
		t.Errorf("Tokens = %v after every take was cancelled, want %d", tk, leaseBurst)
	}
}

// Buckets whose burst would leave the word too little never split.
func TestLeaseOnlyLargeBursts(t *testing.T) {
	for _, c := range []Config{{Rate: 100, Burst: 100}, {Rate: 0, Burst: 1 << 20}, {Rate: Inf}} {
		b := mustBucket(t, c)
		s, _ := b.load()
		b.startLeasing(s)
		if b.st.Load().ls.Load() != nil {
			t.Errorf("%+v: split into stripes", c)
		}
	}
}

// Setters race with admissions from the stripes: retiring a state drains
// its stripes while callers take from them. Whatever interleaving, no more
// than the burst is admitted (the rate is too slow to add a token), and
// Stats counts exactly what was admitted.
func TestLeaseSettersRaceAdmissions(t *testing.T) {
	b := leasingBucket(t)
	var ok atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = b.SetRate(leaseRate * float64(1+i%2))
			if s, _ := b.load(); s.mayLease() {
				b.startLeasing(s) // split again at once, as a collision would
			}
		}
	})
	var workers sync.WaitGroup
	for range 8 {
		workers.Go(func() {
			for range 3000 {
				if b.Allow() {
					ok.Add(1)
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	for b.Allow() {
		ok.Add(1)
	}
	if got := ok.Load(); got > leaseBurst {
		t.Errorf("%d admitted, want at most the burst %d", got, leaseBurst)
	} else {
		// A rate change carries the tokens through a float64 (see
		// carry), rounding down: at most the burst, not exactly.
		t.Logf("%d admitted of %d", got, leaseBurst)
	}
	if s := b.Stats(); s.Admitted != uint64(ok.Load()) {
		t.Errorf("Stats.Admitted = %d, want %d", s.Admitted, ok.Load())
	}
}

// A request larger than the word's share of the burst is paid once the
// bucket has the tokens, though the stripes are empty. The word of a split
// bucket holds at most Burst−P and stripes refill only from it, so AllowN
// of more than that was refused for ever: it joined the stripes back only
// while they held tokens.
func TestLeaseLargeRequestWithEmptyStripes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 100, Burst: 10000})
		s, _ := b.load()
		b.startLeasing(s)
		for b.Allow() { // empties the word and every stripe
		}
		// An hour is far longer than the 100 s the bucket takes to fill.
		// (Drained, it is one word again: TestLeaseIdleAfterDrainOffersTheBurst.)
		for range 2 {
			time.Sleep(time.Hour)
			if !b.AllowN(10000) {
				t.Fatalf("AllowN(burst) refused after 1 h idle; Tokens = %v", b.Tokens())
			}
		}
	})
}

// A drain (a setter's, or a join's) that meets an admission in flight
// counts it once: a token the caller took from its stripe before the drain
// is admitted, and a lease between the word and its stripe reaches the new
// word. Both were dropped, so a bucket drained while callers ran admitted
// less than its burst: 9999 of 10000 for the token, 9968 for the lease.
func TestLeaseDrainKeepsAdmissionsInFlight(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		b := leasingBucket(t)
		ls := b.st.Load().ls.Load()
		if _, _, ok := ls.take(false); !ok {
			t.Fatal("no token in the caller's stripe")
		}
		// The caller is stopped here; a setter drains the stripes.
		if err := b.SetMaxWait(time.Second); err != nil {
			t.Fatal(err)
		}
		n := 0
		if g := b.leasedGrant(true); g.ok {
			n++
		}
		for b.Allow() {
			n++
		}
		if n != leaseBurst {
			t.Errorf("%d admitted, want %d", n, leaseBurst)
		}
	})
	t.Run("lease", func(t *testing.T) {
		b := leasingBucket(t)
		s := b.st.Load()
		ls := s.ls.Load()
		before, last := &ls.s[len(ls.s)-2], &ls.s[len(ls.s)-1]
		n := int(last.n.Swap(0)) // a caller admits them all
		// A caller refills the last stripe as refill does, and is stopped
		// between the word and the stripe.
		last.n.Store(refilling)
		w := s.word.Load()
		u, _ := s.Units(clock.Nanos(), s.base)
		nw, _, _ := s.Take(w, u, leaseSize, 0)
		if !s.word.CompareAndSwap(w, nw) {
			t.Fatal("the word moved")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := b.SetMaxWait(time.Second); err != nil {
				t.Error(err)
			}
		}()
		// startLeasing filled every stripe, and the drain walks them in
		// order: the one before the last emptied says it is at the last,
		// waiting for the refill.
		for before.n.Load() != 0 {
			runtime.Gosched()
		}
		if last.n.CompareAndSwap(refilling, leaseSize-1) {
			n++ // the caller's token
		}
		<-done
		for b.Allow() {
			n++
		}
		if n != leaseBurst {
			t.Errorf("%d admitted, want %d", n, leaseBurst)
		}
	})
}
