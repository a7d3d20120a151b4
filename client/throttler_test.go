package client

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var _ sluice.Limiter = (*Throttler)(nil)

func TestRejectProbability(t *testing.T) {
	tests := []struct {
		name                 string
		requests, accepts, k float64
		maxP, want           float64
	}{
		{"nothing yet", 0, 0, 2, 1, 0},
		{"all accepted", 100, 100, 2, 1, 0},
		{"at the K boundary", 200, 100, 2, 1, 0},
		{"just past the boundary", 201, 100, 2, 1, 1.0 / 202},
		{"half accepted at K=2", 100, 50, 2, 1, 0},
		{"a quarter accepted at K=2", 100, 25, 2, 1, 50.0 / 101},
		{"none accepted", 99, 0, 2, 1, 99.0 / 100},
		{"none accepted is never certain", 1e9, 0, 2, 1, 1e9 / (1e9 + 1)},
		{"K=1.1 throttles sooner", 100, 80, 1.1, 1, 12.0 / 101},
		{"capped", 99, 0, 2, 0.9, 0.9},
		{"K=1 with all accepted", 100, 100, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RejectProbability(tt.requests, tt.accepts, tt.k, tt.maxP)
			if math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("P(%v, %v, K=%v) = %v, want %v", tt.requests, tt.accepts, tt.k, got, tt.want)
			}
		})
	}
}

func TestThrottlerConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   ThrottlerConfig
		field string
	}{
		{"K below 1", ThrottlerConfig{K: 0.5}, "K"},
		{"K NaN", ThrottlerConfig{K: math.NaN()}, "K"},
		{"K infinite", ThrottlerConfig{K: math.Inf(1)}, "K"},
		{"negative window", ThrottlerConfig{Window: -time.Second}, "Window"},
		{"window shorter than buckets", ThrottlerConfig{Window: 10, Buckets: 20}, "Window"},
		{"negative buckets", ThrottlerConfig{Buckets: -1}, "Buckets"},
		{"too many buckets", ThrottlerConfig{Buckets: maxBuckets + 1}, "Buckets"},
		{"max probability above 1", ThrottlerConfig{MaxRejectProbability: 1.5}, "MaxRejectProbability"},
		{"max probability negative", ThrottlerConfig{MaxRejectProbability: -0.1}, "MaxRejectProbability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewThrottler(tt.cfg)
			if !errors.Is(err, sluice.ErrInvalidConfig) || !containsField(err, "ThrottlerConfig."+tt.field) {
				t.Fatalf("err = %v, want sluice.ErrInvalidConfig naming ThrottlerConfig.%s", err, tt.field)
			}
		})
	}
	if _, err := NewThrottler(ThrottlerConfig{}); err != nil {
		t.Fatalf("zero config: %v", err)
	}
}

// seeded returns a deterministic uniform source for one goroutine.
func seeded(seed uint64) func() float64 {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Float64
}

// TestThrottlerSettlesAtKTimesAccepts reproduces the SRE book's claim: under
// heavy overload a client with multiplier K sends about K requests per
// request the backend accepts, so the backend rejects about K−1 per accept
// (one per accept at K = 2).
func TestThrottlerSettlesAtKTimesAccepts(t *testing.T) {
	for _, tc := range []struct {
		k, minUse float64 // minUse: the least share of backend capacity used
	}{
		// At K = 1.1 the client sends barely more than the backend takes, so
		// every second that random draws leave short is capacity lost.
		{1.1, 0.8},
		{1.5, 0.98},
		{2, 0.99},
		{3, 0.99},
	} {
		k := tc.k
		t.Run("K="+ftoa(k), func(t *testing.T) {
			th, err := NewThrottler(ThrottlerConfig{K: k, Random: seeded(1)})
			if err != nil {
				t.Fatal(err)
			}
			const (
				offered  = 100 // requests per second the application attempts
				capacity = 10  // requests per second the backend accepts
				warmup   = 3 * time.Minute
				run      = 10 * time.Minute
			)
			t0 := time.Unix(1_700_000_000, 0)
			var sent, accepted, rejected, local int
			servedThisSecond, second := 0, -1
			for i := range int(run.Seconds()) * offered {
				at := t0.Add(time.Duration(i) * time.Second / offered)
				if s := i / offered; s != second {
					second, servedThisSecond = s, 0
				}
				measuring := at.Sub(t0) >= warmup
				p, err := th.TryAcquireAt(at)
				if err != nil {
					if !errors.Is(err, sluice.ErrThrottled) {
						t.Fatalf("rejection %v does not match ErrThrottled", err)
					}
					if measuring {
						local++
					}
					continue
				}
				if measuring {
					sent++
				}
				if servedThisSecond < capacity {
					servedThisSecond++
					p.Release(sluice.Success, 0)
					if measuring {
						accepted++
					}
				} else {
					p.Release(sluice.Dropped, 0)
					if measuring {
						rejected++
					}
				}
			}
			perAccept := float64(rejected) / float64(accepted)
			t.Logf("K=%v: sent %d, accepted %d, backend rejected %d (%.3f per accept), throttled locally %d",
				k, sent, accepted, rejected, perAccept, local)
			if want := k - 1; math.Abs(perAccept-want) > 0.05*k {
				t.Fatalf("backend rejections per accept = %.3f, want about K−1 = %.2f", perAccept, want)
			}
			if full := capacity * (run - warmup).Seconds(); float64(accepted) < tc.minUse*full {
				t.Fatalf("accepted %d, want at least %v of the backend's capacity (%v)", accepted, tc.minUse, full)
			}
		})
	}
}

func TestThrottlerNeverRejectsAHealthyBackend(t *testing.T) {
	th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }}) // 0 rejects whenever P > 0
	t0 := time.Unix(0, 0)
	for i := range 10_000 {
		p, err := th.TryAcquireAt(t0.Add(time.Duration(i) * time.Millisecond))
		if err != nil {
			t.Fatalf("request %d rejected by a throttler whose backend accepted everything: %v", i, err)
		}
		p.Release(sluice.Success, time.Millisecond)
	}
	if s := th.Stats(); s.Admitted != 10_000 || s.RejectedTotal() != 0 || s.InFlight != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestThrottlerOutcomes(t *testing.T) {
	t0 := time.Unix(0, 0)
	never := func() float64 { return 1 } // never below P: admit everything, observe P
	th, _ := NewThrottler(ThrottlerConfig{Random: never})
	acquire := func() sluice.Permit {
		t.Helper()
		p, err := th.TryAcquireAt(t0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for range 3 {
		p := acquire()
		p.Release(sluice.Dropped, 0)
	}
	if got, want := th.RejectProbabilityAt(t0), 3.0/4; got != want {
		t.Fatalf("after 3 dropped: P = %v, want %v", got, want)
	}
	p := acquire()
	if s := th.Stats(); s.InFlight != 1 {
		t.Fatalf("in flight = %d, want 1", s.InFlight)
	}
	p.Cancel() // never sent: the request must not count
	if got, want := th.RejectProbabilityAt(t0), 3.0/4; got != want {
		t.Fatalf("after a cancel: P = %v, want %v (the cancelled request must not count)", got, want)
	}
	p = acquire()
	p.Release(sluice.Ignore, 0) // the backend answered: an accept
	if got, want := th.RejectProbabilityAt(t0), (4.0-2)/5; got != want {
		t.Fatalf("after an ignore: P = %v, want %v", got, want)
	}
	p = acquire()
	p.Release(sluice.Success, 30*time.Second) // counted at t0+30s
	if got, want := th.RejectProbabilityAt(t0.Add(30*time.Second)), (5.0-4)/6; got != want {
		t.Fatalf("after a success: P = %v, want %v", got, want)
	}
	// Everything leaves the two-minute window.
	if got := th.RejectProbabilityAt(t0.Add(3 * time.Minute)); got != 0 {
		t.Fatalf("after the window: P = %v, want 0", got)
	}
	if s := th.Stats(); s.InFlight != 0 || s.Admitted != 6 {
		t.Fatalf("stats = %+v, want 6 admitted, none in flight", s)
	}
}

func TestThrottlerRejectsAndCounts(t *testing.T) {
	t0 := time.Unix(0, 0)
	always := func() float64 { return 0 }
	th, _ := NewThrottler(ThrottlerConfig{Random: always})
	p, err := th.TryAcquireAt(t0) // P = 0 for the first request
	if err != nil {
		t.Fatal(err)
	}
	p.Release(sluice.Dropped, 0)
	_, err = th.TryAcquireAt(t0) // P = 1/2, and the draw is 0
	if !errors.Is(err, sluice.ErrThrottled) || sluice.ReasonOf(err) != sluice.ReasonThrottled {
		t.Fatalf("err = %v, want a ReasonThrottled rejection", err)
	}
	if s := th.Stats(); s.Rejected[sluice.ReasonThrottled] != 1 || s.Admitted != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestThrottlerAcquireHonoursContext(t *testing.T) {
	th, _ := NewThrottler(ThrottlerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := th.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	p, err := th.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Release(sluice.Success, 0)
}

func TestThrottlerAllocs(t *testing.T) {
	th, _ := NewThrottler(ThrottlerConfig{})
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := th.TryAcquire()
		p.Release(sluice.Success, 0)
	}); n != 0 {
		t.Fatalf("admit allocates %v times, want 0", n)
	}
	down, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }})
	for range 10 {
		p, _ := down.TryAcquire()
		p.Release(sluice.Dropped, 0)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := down.TryAcquire(); err == nil {
			t.Fatal("admitted, want a local rejection")
		}
	}); n != 0 {
		t.Fatalf("reject allocates %v times, want 0", n)
	}
}
