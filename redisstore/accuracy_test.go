package redisstore

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// offer runs 4 replicas (each its own Store, so its own client and
// connections) offering 4,000/s in total to one key of a shared 1,000/s
// bucket for d, and returns the admissions and the elapsed time.
func offer(t *testing.T, cfg RateConfig, d time.Duration) (admitted int64, offered int64, elapsed time.Duration) {
	t.Helper()
	var bs [4]*Buckets
	for i := range bs {
		s := openStore(t, srv.URL(), Config{Timeout: 100 * time.Millisecond}, false)
		if err := s.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
		bs[i] = newBuckets(t, s, cfg)
	}
	var adm, off, last atomic.Int64 // last: ns after start of the latest admission
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 16 { // 4 callers per replica, 250/s each
		wg.Go(func() {
			b := bs[i%4]
			for j := 0; ; j++ {
				at := start.Add(time.Duration(j) * 4 * time.Millisecond)
				if at.Sub(start) >= d {
					return
				}
				if w := time.Until(at); w > 0 {
					time.Sleep(w)
				}
				off.Add(1)
				if _, err := b.TryAcquire("acc"); err == nil {
					adm.Add(1)
					now := int64(time.Since(start))
					for {
						l := last.Load()
						if now <= l || last.CompareAndSwap(l, now) {
							break
						}
					}
				} else if !errors.Is(err, sluice.ErrRate) {
					t.Errorf("decision: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The window is up to the latest admission: requests still in flight
	// after it could not use the tokens that came meanwhile.
	return adm.Load(), off.Load(), time.Duration(last.Load())
}

// Four replicas share 1,000/s (burst 100) for one key while 4,000/s are
// offered: the admissions are within 1% of 1,000/s × elapsed + burst; in
// batched mode (20 tokens a round trip) within the stated bound, R·Batch
// = 80 tokens more (or fewer, for tokens still held at the end), plus 1%.
func TestAccuracySharedRate(t *testing.T) {
	d := 3 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	for _, tc := range []struct {
		name  string
		batch int
	}{{"exact", 0}, {"batched", 20}} {
		t.Run(tc.name, func(t *testing.T) {
			newStore(t, Config{}) // flush
			cfg := RateConfig{Rate: 1000, Burst: 100, Batch: tc.batch}
			adm, off, el := offer(t, cfg, d)
			want := cfg.Rate*el.Seconds() + float64(cfg.Burst)
			tol := 0.01*want + float64(4*tc.batch)
			t.Logf("%s: offered %d (%.0f/s), admitted %d in %v; want %.0f ± %.0f (%.2f%% off)", tc.name, off, float64(off)/el.Seconds(), adm, el.Round(time.Millisecond), want, tol, 100*(float64(adm)-want)/want)
			if float64(off) < 2*want {
				t.Fatalf("offered only %d: the machine could not generate the load, the check would prove nothing", off)
			}
			if math.Abs(float64(adm)-want) > tol {
				t.Fatalf("admitted %d, want %.0f ± %.0f", adm, want, tol)
			}
		})
	}
}

// A shared bucket composes with local limiters under sluice.All, and its
// per-key form is what httplimit's Config.PerKey takes.
func TestComposeAll(t *testing.T) {
	s := newStore(t, Config{Timeout: 200 * time.Millisecond})
	shared := newBuckets(t, s, RateConfig{Rate: 1, Burst: 3})
	conc := newConcurrency(t, s, ConcurrencyConfig{Key: "all", Limit: 2})
	all := sluice.All(shared.Key("global"), conc)
	p1, err1 := all.TryAcquire()
	p2, err2 := all.TryAcquire()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Third: the bucket has a token, the concurrency limit does not; the
	// bucket's token is given back (Cancel refunds it in Redis).
	if _, err := all.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
		t.Fatalf("third: %v", err)
	}
	p1.Release(sluice.Success, 0)
	p3, err := all.TryAcquire()
	if err != nil {
		t.Fatalf("after a release, with the refunded token: %v", err)
	}
	p2.Release(sluice.Success, 0)
	p3.Release(sluice.Success, 0)
	if _, err := all.TryAcquire(); !errors.Is(err, sluice.ErrRate) {
		t.Fatalf("fourth: bucket empty, want a rate rejection: %v", err)
	}
	var _ interface {
		Acquire(context.Context, string) (sluice.Permit, error)
		TryAcquire(string) (sluice.Permit, error)
	} = shared
}
