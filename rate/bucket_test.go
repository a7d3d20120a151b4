package rate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const year = 365 * 24 * time.Hour

// mustBucket makes a bucket of cfg. Burst 0 at a positive rate, which
// NewBucket refuses as a Burst left out, is reached as a caller reaches
// it: a bucket of burst 1 whose SetBurst(0) closes it.
func mustBucket(t testing.TB, cfg Config) *Bucket {
	t.Helper()
	closed := ValidOpen(cfg.Rate, cfg.Burst) != nil
	if closed {
		cfg.Burst = 1
	}
	b, err := NewBucket(cfg)
	if err == nil && closed {
		err = b.SetBurst(0)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewBucketErrors(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{Rate: -1}, "Config.Rate"},
		{Config{Rate: math.NaN()}, "Config.Rate"},
		{Config{Rate: math.Inf(-1)}, "Config.Rate"},
		{Config{Rate: 1, Burst: -1}, "Config.Burst"},
		{Config{Rate: 1, Burst: 1, MaxWait: -time.Second}, "Config.MaxWait"},
		// Tokens back at 10/s, but 63 years to fill: it could not count
		// its refill, and would never have refilled.
		{Config{Rate: 10, Burst: 2e10}, "Config.Burst"},
		// A Burst left out: refills, yet refuses every request for ever.
		{Config{Rate: 100}, "Config.Burst"},
	}
	for _, tt := range tests {
		_, err := NewBucket(tt.cfg)
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("NewBucket(%+v) = %v, want an sluice.ErrInvalidConfig naming %s", tt.cfg, err, tt.field)
		}
	}
	for _, cfg := range []Config{{}, {Rate: Inf}, {Rate: 0, Burst: 0, MaxWait: time.Second}} {
		if _, err := NewBucket(cfg); err != nil {
			t.Errorf("NewBucket(%+v) = %v, want a bucket: closed (Rate 0) or unlimited (Inf) needs no burst", cfg, err)
		}
	}
	b := mustBucket(t, Config{Rate: 1, Burst: 1})
	if err := b.SetRate(math.NaN()); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetRate(NaN) = %v", err)
	}
	if err := b.SetBurst(-3); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetBurst(-3) = %v", err)
	}
	if err := b.SetMaxWait(-1); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetMaxWait(-1) = %v", err)
	}
	if err := b.SetBurst(2e9); !errors.Is(err, sluice.ErrInvalidConfig) { // 63 years at 1/s
		t.Errorf("SetBurst(2e9) at rate 1 = %v", err)
	}
	if err := b.SetRate(1e-9); err != nil { // burst 1: 31.7 years
		t.Errorf("SetRate(1e-9) at burst 1 = %v", err)
	}
	if err := b.SetBurst(2); !errors.Is(err, sluice.ErrInvalidConfig) { // 63 years at 1e-9/s
		t.Errorf("SetBurst(2) at rate 1e-9 = %v", err)
	}
	if err := b.SetRate(1); err != nil {
		t.Fatal(err)
	}
	if got := b.Config(); got != (Config{Rate: 1, Burst: 1}) {
		t.Errorf("a rejected setter changed the config: %+v", got)
	}
}

// admitted counts AllowAt(·, n) successes for calls spaced step apart
// starting at t0.
func admitted(b *Bucket, calls int, step time.Duration, n int) int {
	got := 0
	for i := range calls {
		if b.AllowAt(t0.Add(time.Duration(i)*step), n) {
			got++
		}
	}
	return got
}

func TestAllowEdges(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		calls int
		step  time.Duration
		n     int
		want  int
	}{
		{"burst at once", Config{Rate: 10, Burst: 5}, 100, 0, 1, 5},
		{"rate over a second", Config{Rate: 10, Burst: 1}, 1000, time.Millisecond, 1, 10},
		{"rate 0: burst in total", Config{Rate: 0, Burst: 3}, 1000, time.Hour, 1, 3},
		{"burst 0: nothing", Config{Rate: 1e6, Burst: 0}, 1000, time.Second, 1, 0},
		{"Inf: everything, burst ignored", Config{Rate: Inf, Burst: 0}, 1000, 0, 1, 1000},
		{"+Inf", Config{Rate: math.Inf(1)}, 10, 0, 1 << 40, 10},
		{"n > burst: never", Config{Rate: 1e9, Burst: 4}, 100, time.Second, 5, 0},
		{"n == burst", Config{Rate: 1, Burst: 4}, 9, time.Second, 4, 3},
		{"n 0 takes nothing", Config{Rate: 0, Burst: 0}, 10, 0, 0, 10},
		{"n negative takes nothing", Config{Rate: 0, Burst: 0}, 10, 0, -7, 10},
		{"1e-9/s: one per 31 years", Config{Rate: 1e-9, Burst: 1}, 100, 100 * 24 * time.Hour, 1, 1},
		{"tiny rate never jams open", Config{Rate: 1e-300, Burst: 2}, 1000, 1000 * time.Hour, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBucket(t, tt.cfg)
			if got := admitted(b, tt.calls, tt.step, tt.n); got != tt.want {
				t.Fatalf("admitted %d, want %d", got, tt.want)
			}
		})
	}
}

// At rates above 1e9/s a token costs less than a nanosecond. The bucket
// must neither jam open (a 0-cost token) nor shut (1 ns per token).
func TestHugeRates(t *testing.T) {
	for _, r := range []float64{2e9, 1e10, 3.3e11} {
		burst := int(r/1e9) + 1 // room for the tokens of one nanosecond
		b := mustBucket(t, Config{Rate: r, Burst: burst})
		want := float64(burst) + r*999e-9 // full at the first call, then 999 ns of refill
		got := 0
		for ns := range 1000 { // a call every nanosecond for 1 µs, as many as admitted
			at := t0.Add(time.Duration(ns + 1))
			for b.AllowAt(at, 1) {
				got++
				if float64(got) > want*(1+1.0/(1<<16))+1 {
					t.Fatalf("rate %g: jammed open, %d admitted in 1 µs", r, got)
				}
			}
		}
		if math.Abs(float64(got)-want) > want/(1<<16)+1 {
			t.Errorf("rate %g: %d admitted in 1 µs, want %.0f", r, got, want)
		}
	}
}

func TestTimeGoingBack(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1, Burst: 2})
	if !b.AllowAt(t0.Add(10*time.Second), 2) {
		t.Fatal("full bucket rejected")
	}
	// An earlier time sees fewer tokens, never a fresh bucket.
	for _, back := range []time.Duration{time.Second, time.Hour, 100 * 365 * 24 * time.Hour} {
		if b.AllowAt(t0.Add(10*time.Second-back), 1) {
			t.Fatalf("admitted %v in the past", back)
		}
	}
	if got := b.TokensAt(t0.Add(9 * time.Second)); got != -1 {
		t.Errorf("tokens a second back = %v, want -1", got)
	}
	if !b.AllowAt(t0.Add(11*time.Second), 1) || b.AllowAt(t0.Add(11*time.Second), 1) {
		t.Fatal("refill after the clock came back is wrong")
	}
}

// Times far apart move the internal base; no tokens are made or lost.
func TestFarTimes(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1e12, Burst: 1e6}) // shift 26: rebase every ~34 s
	for _, at := range []time.Time{time.Unix(0, 0), t0, t0.Add(time.Minute), t0.Add(24 * time.Hour), t0.Add(200 * 365 * 24 * time.Hour)} {
		if !b.AllowAt(at, 1e6) {
			t.Fatalf("at %v: full bucket rejected", at)
		}
		if b.AllowAt(at, 1) {
			t.Fatalf("at %v: empty bucket admitted", at)
		}
		if got := b.TokensAt(at.Add(500 * time.Nanosecond)); math.Abs(got-5e5) > 5e5/(1<<16) {
			t.Fatalf("at %v: tokens after 500 ns = %v, want 5e5", at, got)
		}
	}
}

// A read at any time changes nothing. A far one used to move the internal
// base there, and a word that did not fit relative to it came back wrong by
// the distance from the old base: this bucket, an hour old, was left an
// hour in debt by one look three days ahead.
func TestFarReadChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 1e9, Burst: 10}) // a word spans ±39 h
		time.Sleep(time.Hour)
		if !b.AllowN(10) {
			t.Fatal("full bucket rejected")
		}
		time.Sleep(time.Second)
		now := time.Now()
		for _, at := range []time.Time{now.Add(72 * time.Hour), now.Add(-72 * time.Hour), now.Add(200 * year), now.Add(-100 * year)} {
			_ = b.TokensAt(at)
			if got := b.Tokens(); got != 10 {
				t.Fatalf("after TokensAt(%v from now): %v tokens, want 10", at.Sub(now), got)
			}
		}
		if !b.Allow() {
			t.Fatal("refilled bucket rejected after far reads")
		}
		if err := b.WaitN(context.Background(), 9); err != nil {
			t.Fatalf("WaitN(9) = %v", err)
		}
	})
}

// Admissions at times further from the bucket's base than its word can
// count keep the bucket exact: one that finds it full counts its new word
// from then, another keeps it where it was, and a refusal changes nothing.
// Moving the word there first, saturated, turned a refusal 72 h back into
// 3 lost tokens, gave a reservation 72 h back a delay of 39 h (the word's
// reach) instead of 72 h, and left t0 with 1.4e14 tokens of debt instead
// of the 2.6e14 the drain 72 h later leaves.
func TestFarAdmissionsKeepTheBucketExact(t *testing.T) {
	const rate = 1e9 // a word spans ±39 h
	b := mustBucket(t, Config{Rate: rate, Burst: 10})
	if !b.AllowAt(t0, 10) {
		t.Fatal("full bucket rejected")
	}
	back := t0.Add(-72 * time.Hour)
	if b.AllowAt(back, 1) {
		t.Fatal("admitted 72 h before the bucket was drained")
	}
	if got := b.TokensAt(t0.Add(3)); got != 3 {
		t.Fatalf("after a refusal 72 h back: %v tokens 3 ns after the drain, want 3", got)
	}
	r, ok := b.ReserveAt(back, 1, 100*time.Hour)
	if want := 72*time.Hour + 1; !ok || r.Delay() != want {
		t.Fatalf("ReserveAt 72 h back = %v, delay %v; want the token %v later", ok, r.Delay(), want)
	}
	if got := b.TokensAt(t0.Add(3)); got != 2 {
		t.Fatalf("after the reservation: %v tokens 3 ns after the drain, want 2", got)
	}
	ahead := t0.Add(72 * time.Hour)
	if !b.AllowAt(ahead, 10) || b.AllowAt(ahead, 1) {
		t.Fatal("72 h later: want the burst, then nothing")
	}
	if got := b.TokensAt(ahead.Add(5)); got != 5 {
		t.Fatalf("72 h later: %v tokens 5 ns after the drain, want 5", got)
	}
	// Back at t0 the bucket is as the drain 72 h later left it: in debt.
	if got, want := b.TokensAt(t0), -rate*(72*time.Hour).Seconds(); got != want {
		t.Fatalf("back at t0: %v tokens, want %v", got, want)
	}
}

// A burst too large to count at its rate (Burst times the interval, in
// whole units, over 2^60) is refused with an error naming Config.Burst, by
// NewBucket and by the setters; the largest countable one works. (Rate
// 1e19 with the largest int burst was accepted, then read as full but
// refused every admission: Tau wrapped.)
func TestUncountableBurstIsRefused(t *testing.T) {
	for _, c := range []Config{
		{Rate: 1e19, Burst: math.MaxInt},
		{Rate: 1e10, Burst: 5e18},
		{Rate: 1e19, Burst: 1<<60 + 1},
		{Rate: 1.5e9, Burst: 1.5e18}, // 32 years to fill, but 1 ns a token as counted: 48
	} {
		_, err := NewBucket(c)
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Burst") {
			t.Errorf("NewBucket(%+v) = %v, want an sluice.ErrInvalidConfig naming Config.Burst", c, err)
		}
	}
	b := mustBucket(t, Config{Rate: 1e19, Burst: 1 << 60})
	if b.TokensAt(t0) != 1<<60 || !b.AllowAt(t0, 1<<60) || b.AllowAt(t0, 1) || !b.AllowAt(t0.Add(time.Second), 1) {
		t.Error("rate 1e19, burst 2^60: want it full, its burst once, then a refill")
	}
	if err := b.SetBurst(math.MaxInt); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetBurst(MaxInt) at rate 1e19 = %v", err)
	}
	big := mustBucket(t, Config{Rate: 0, Burst: math.MaxInt}) // no refill: any burst counts
	if err := big.SetRate(1e19); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetRate(1e19) with the largest burst = %v", err)
	}
	if c := big.Config(); c.Rate != 0 {
		t.Errorf("a refused SetRate changed the rate to %v", c.Rate)
	}
}

func TestSetRateKeepsTokens(t *testing.T) {
	b := mustBucket(t, Config{Rate: 10, Burst: 10})
	if !b.AllowAt(t0, 10) {
		t.Fatal("full bucket rejected")
	}
	at := t0.Add(500 * time.Millisecond) // 5 tokens
	if err := b.SetRateAt(at, 100); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(at); got != 5 {
		t.Fatalf("tokens after SetRate = %v, want 5", got)
	}
	if got := b.TokensAt(at.Add(30 * time.Millisecond)); math.Abs(got-8) > 1e-9 {
		t.Fatalf("refill at the new rate: %v, want 8", got)
	}
	if err := b.SetBurstAt(at, 2); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(at); got != 2 {
		t.Fatalf("tokens after SetBurst(2) = %v, want 2", got)
	}
	if err := b.SetRateAt(at, 0); err != nil {
		t.Fatal(err)
	}
	if !b.AllowAt(at.Add(time.Hour), 2) || b.AllowAt(at.Add(time.Hour), 1) {
		t.Fatal("rate 0 refilled")
	}
	if err := b.SetRateAt(at, Inf); err != nil {
		t.Fatal(err)
	}
	if !b.AllowAt(at, 1<<30) {
		t.Fatal("Inf rejected")
	}
	if err := b.SetRateAt(at, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(at); got != 2 {
		t.Fatalf("leaving Inf: tokens %v, want a full bucket (2)", got)
	}
}

// A debt (reservations waiting) survives a rate change in tokens.
func TestSetRateKeepsDebt(t *testing.T) {
	b := mustBucket(t, Config{Rate: 10, Burst: 1})
	b.AllowAt(t0, 1)
	r, ok := b.ReserveAt(t0, 1, time.Second)
	if !ok || r.Delay() != 100*time.Millisecond {
		t.Fatalf("reserve: %v %v", r.Delay(), ok)
	}
	if err := b.SetRateAt(t0, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(t0); got != -1 {
		t.Fatalf("debt after SetRate = %v, want -1", got)
	}
	r.Cancel()
	r.Cancel() // a second Cancel does nothing
	if got := b.TokensAt(t0); got != 0 {
		t.Fatalf("after Cancel: %v, want 0", got)
	}
}

func TestZeroBucket(t *testing.T) {
	var b Bucket
	if b.Allow() || b.AllowAt(time.Time{}, 1) || b.AllowN(1) {
		t.Fatal("zero Bucket admitted")
	}
	if r, ok := b.Reserve(1, time.Hour); ok || r.Reason() != sluice.ReasonTooLarge {
		t.Fatalf("zero Bucket reserve: %v %v", ok, r.Reason())
	}
	// Configured by setters, a zero Bucket starts empty: rate 0 has no
	// tokens to carry over.
	if err := b.SetBurstAt(t0, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRateAt(t0, 1e3); err != nil {
		t.Fatal(err)
	}
	if b.AllowAt(t0, 1) || !b.AllowAt(t0.Add(time.Millisecond), 1) {
		t.Fatal("configured zero Bucket: wrong refill")
	}
	if got := b.Stats(); got.Admitted != 1 || got.Rejected[sluice.ReasonTooLarge] != 4 || got.Rejected[sluice.ReasonRate] != 1 || got.Limit != 1e3 {
		t.Fatalf("stats %+v", got)
	}
}

func TestReserveAt(t *testing.T) {
	b := mustBucket(t, Config{Rate: 10, Burst: 2})
	if r, ok := b.ReserveAt(t0, 3, time.Hour); ok || r.Reason() != sluice.ReasonTooLarge || r.Delay() != -1 {
		t.Fatalf("n > burst: %v %v %v", ok, r.Reason(), r.Delay())
	}
	r1, ok := b.ReserveAt(t0, 2, 0)
	if !ok || r1.Delay() != 0 || r1.Tokens() != 2 {
		t.Fatalf("full bucket: %v %v", ok, r1.Delay())
	}
	r2, ok := b.ReserveAt(t0, 1, 100*time.Millisecond)
	if !ok || r2.Delay() != 100*time.Millisecond {
		t.Fatalf("wait one token: %v %v", ok, r2.Delay())
	}
	r3, ok := b.ReserveAt(t0, 1, 150*time.Millisecond)
	if ok || r3.Reason() != sluice.ReasonRate || r3.Delay() != 200*time.Millisecond {
		t.Fatalf("beyond maxWait: %v %v %v", ok, r3.Reason(), r3.Delay())
	}
	r3.Cancel() // cancelling a failed reservation gives nothing
	if got := b.TokensAt(t0); got != -1 {
		t.Fatalf("a failed reservation changed the bucket: %v", got)
	}
	r2.Cancel()
	r1.Cancel()
	if got := b.TokensAt(t0); got != 2 {
		t.Fatalf("after cancelling all: %v tokens, want 2", got)
	}
	z := mustBucket(t, Config{Rate: 0, Burst: 1})
	z.AllowAt(t0, 1)
	if r, ok := z.ReserveAt(t0, 1, time.Hour); ok || r.Reason() != sluice.ReasonRate || r.Delay() != -1 {
		t.Fatalf("rate 0, empty: %v %v %v", ok, r.Reason(), r.Delay())
	}
}

func TestTryAcquire(t *testing.T) {
	b := mustBucket(t, Config{Rate: 4, Burst: 1})
	p, err := b.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire()
	ra, _ := sluice.RetryAfter(err)
	if !errors.Is(err, sluice.ErrRate) || ra <= 200*time.Millisecond || ra > 250*time.Millisecond {
		t.Fatalf("second TryAcquire: %v (retry after %v)", err, ra)
	}
	p.Cancel() // refunds: the next one is admitted
	if _, err := b.TryAcquire(); err != nil {
		t.Fatalf("after Cancel: %v", err)
	}
	p2, _ := b.TryAcquire()
	p2.Release(sluice.Success, time.Millisecond) // nothing to give back
	s := b.Stats()
	if s.Admitted != 2 || s.Rejected[sluice.ReasonRate] != 2 || s.Limit != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// A state owns its cache lines: 128 bytes, the word, its counter and the
// fields Allow reads in the first 64.
func TestStateLayout(t *testing.T) {
	var s state
	if size := unsafe.Sizeof(s); size != 128 {
		t.Errorf("state is %d bytes, want 128", size)
	}
	if end := unsafe.Offsetof(s.params) + unsafe.Offsetof(s.params.maxWait); end > 64 {
		t.Errorf("hot fields end at byte %d, want <= 64", end)
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1e6, Burst: 10})
	if n := testing.AllocsPerRun(1000, func() { b.Allow() }); n != 0 {
		t.Errorf("Allow allocates %v per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() { r, _ := b.ReserveAt(t0, 1, time.Second); r.Cancel() }); n != 0 {
		t.Errorf("ReserveAt+Cancel allocates %v per call", n)
	}
}

// golang/go#71154: in x/time/rate a tiny limit overflowed the duration of a
// token and the limiter admitted at once. Here the wait saturates instead.
func TestTinyRateNeverJamsOpen(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1e-9, Burst: 1}) // a token every 31.7 years
	if !b.AllowAt(t0, 1) {
		t.Fatal("full bucket rejected")
	}
	year := 365 * 24 * time.Hour
	r, ok := b.ReserveAt(t0, 1, time.Hour)
	if ok || r.Delay() < 31*year || r.Delay() > 32*year {
		t.Fatalf("reserve within an hour: ok %v, delay %v; want a rejection 31.7 years out", ok, r.Delay())
	}
	r, ok = b.ReserveAt(t0, 1, time.Duration(math.MaxInt64))
	if !ok || r.Delay() < 31*year || r.Delay() > 32*year {
		t.Fatalf("reserve without bound: ok %v, delay %v", ok, r.Delay())
	}
	for _, at := range []time.Duration{time.Hour, 30 * year, 63 * year} {
		if b.AllowAt(t0.Add(at), 1) {
			t.Fatalf("admitted %v later with the next two tokens owed", at)
		}
	}
	if !b.AllowAt(t0.Add(96*year), 1) {
		t.Fatal("no token after 96 years")
	}
}

// Explicit times at the ends of time.Time's range saturate; they neither
// panic nor create tokens.
func TestExtremeTimes(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1e6, Burst: 2})
	if !b.AllowAt(time.Time{}, 2) || b.AllowAt(time.Time{}, 1) {
		t.Fatal("year 1: want the burst, then nothing")
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if !b.AllowAt(far, 2) || b.AllowAt(far, 1) {
		t.Fatal("year 9999: want a refilled burst, then nothing")
	}
	if tk := b.TokensAt(time.Time{}); tk > 0 {
		t.Fatalf("back at year 1: %v tokens", tk)
	}
}

// A bucket that fills in just under MaxFill still refills at its rate.
func TestLongFillRefills(t *testing.T) {
	cfg := Config{Rate: 10, Burst: int(MaxFill.Seconds() * 10)}
	b := mustBucket(t, cfg)
	now := time.Unix(1_000_000, 0)
	if !b.AllowAt(now, cfg.Burst) {
		t.Fatal("a full bucket refused its burst")
	}
	if b.AllowAt(now, 1) {
		t.Fatal("an empty bucket admitted")
	}
	if !b.AllowAt(now.Add(time.Second), 10) {
		t.Error("an empty bucket of rate 10 did not admit 10 a second later")
	}
	if err := ValidFill(10, cfg.Burst+10); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("ValidFill just past MaxFill = %v", err)
	}
	for _, ok := range []Config{{Rate: 1e-300, Burst: 2}, {Rate: 0, Burst: 1 << 40}, {Rate: Inf, Burst: 1 << 40}} {
		if err := ValidFill(ok.Rate, ok.Burst); err != nil {
			t.Errorf("ValidFill(%v, %d) = %v: never refilling within the horizon is exact", ok.Rate, ok.Burst, err)
		}
	}
}
