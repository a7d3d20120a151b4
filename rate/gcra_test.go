package rate

import (
	"math"
	"testing"
	"time"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		mode     mode
		shift    uint8
		interval int64
	}{
		{"zero config", Config{}, modeZero, 0, 0},
		{"rate 0", Config{Rate: 0, Burst: 5}, modeZero, 0, 0},
		{"inf", Config{Rate: Inf, Burst: 5}, modeInf, 0, 0},
		{"+Inf", Config{Rate: math.Inf(1)}, modeInf, 0, 0},
		{"1/s", Config{Rate: 1, Burst: 1}, modeRate, 0, 1e9},
		{"1000/s", Config{Rate: 1000, Burst: 10}, modeRate, 0, 1e6},
		{"1e6/s gets sub-ns units", Config{Rate: 1e6, Burst: 10}, modeRate, 7, 1000 << 7},
		{"1e9/s", Config{Rate: 1e9, Burst: 1}, modeRate, 16, 1 << 16},
		{"1e10/s: 0.1 ns per token", Config{Rate: 1e10, Burst: 1}, modeRate, 20, 104858},
		{"1e18/s hits the finest unit", Config{Rate: 1e18, Burst: 1}, modeRate, 30, 1},
		{"1e300/s never rounds to 0", Config{Rate: 1e300, Burst: 1}, modeRate, 30, 1},
		{"1e-9/s, burst 1: 31 years per token", Config{Rate: 1e-9, Burst: 1}, modeRate, 0, 1e18},
		{"1e-9/s, burst 2: would overflow, never refills", Config{Rate: 1e-9, Burst: 2}, modeZero, 0, 0},
		{"1e-300/s", Config{Rate: 1e-300, Burst: 1}, modeZero, 0, 0},
		{"smallest float", Config{Rate: math.SmallestNonzeroFloat64, Burst: 1}, modeZero, 0, 0},
		{"huge burst limits the shift", Config{Rate: 1e9, Burst: 1 << 50}, modeRate, 10, 1 << 10},
		{"max burst", Config{Rate: 1, Burst: math.MaxInt}, modeZero, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := compile(tt.cfg)
			if p.mode != tt.mode || p.shift != tt.shift || p.interval != tt.interval {
				t.Fatalf("compile = mode %d shift %d interval %d, want mode %d shift %d interval %d",
					p.mode, p.shift, p.interval, tt.mode, tt.shift, tt.interval)
			}
			if p.mode == modeRate {
				if p.tau > maxTau || p.tau != p.interval*p.burst {
					t.Fatalf("tau %d out of range", p.tau)
				}
				if p.lim<<p.shift != 1<<offsetBits {
					t.Fatalf("lim %d inconsistent with shift %d", p.lim, p.shift)
				}
			}
		})
	}
}

// The effective rate, 1e9*2^shift/interval, must match the configured one
// to 2^-17 wherever the fixed point has room.
func TestCompilePrecision(t *testing.T) {
	for _, r := range []float64{1e-6, 0.3, 1, 3, 7, 333, 3e4, 1.2345e5, 1e6, 3e8, 1e9, 2.5e9, 1e10, 7.7e11, 1e13} {
		p := compile(Config{Rate: r, Burst: 1000})
		eff := 1e9 * float64(uint64(1)<<p.shift) / float64(p.interval)
		if rel := math.Abs(eff-r) / r; rel > 1.0/(1<<17) {
			t.Errorf("rate %g: effective %g, relative error %.2g", r, eff, rel)
		}
	}
}

func TestTake(t *testing.T) {
	p := compile(Config{Rate: 10, Burst: 3}) // 100ms per token, tau 300ms
	const ms = int64(time.Millisecond)
	tests := []struct {
		name         string
		e, u, n, max int64
		ne, wait     int64
		ok           bool
	}{
		{"full bucket", eMin, 1000 * ms, 1, 0, 800 * ms, 0, true},
		{"full bucket, whole burst", eMin, 1000 * ms, 3, 0, 1000 * ms, 0, true},
		{"empty, no wait allowed", 1000 * ms, 1000 * ms, 1, 0, 1000 * ms, 100 * ms, false},
		{"empty, wait allowed", 1000 * ms, 1000 * ms, 1, 100 * ms, 1100 * ms, 100 * ms, true},
		{"empty, wait one short", 1000 * ms, 1000 * ms, 1, 100*ms - 1, 1000 * ms, 100 * ms, false},
		{"debt adds up", 1200 * ms, 1000 * ms, 2, time.Hour.Nanoseconds(), 1400 * ms, 400 * ms, true},
		{"partial refill", 1000 * ms, 1150 * ms, 1, 0, 1100 * ms, 0, true},
		{"time went back: fewer tokens", 1000 * ms, 900 * ms, 1, 0, 1000 * ms, 200 * ms, false},
		{"saturated debt stays saturated", eMax, 0, 1, eMax, eMax, eMax, true},
		{"n 0", 1000 * ms, 1000 * ms, 0, 0, 1000 * ms, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ne, wait, ok := p.take(tt.e, tt.u, tt.n, tt.max)
			if ne != tt.ne || wait != tt.wait || ok != tt.ok {
				t.Fatalf("take = (%d, %d, %v), want (%d, %d, %v)", ne, wait, ok, tt.ne, tt.wait, tt.ok)
			}
		})
	}
}

func TestRefundAndTokens(t *testing.T) {
	p := compile(Config{Rate: 10, Burst: 3})
	const ms = int64(time.Millisecond)
	tests := []struct {
		name   string
		e, n   int64
		u      int64
		tokens float64
	}{
		{"refund into debt", 1200 * ms, 1, 1000 * ms, -1},
		{"refund to empty", 1100 * ms, 1, 1000 * ms, 0},
		{"refund past burst is clamped", 800 * ms, 2, 1000 * ms, 3},
		{"refund on a full bucket", eMin, 3, 1000 * ms, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.tokens(p.refund(tt.e, tt.n), tt.u); got != tt.tokens {
				t.Fatalf("tokens after refund = %v, want %v", got, tt.tokens)
			}
		})
	}
	z := compile(Config{Rate: 0, Burst: 3})
	if got := z.refund(2, 5); got != 3 {
		t.Errorf("rate 0: refund over burst = %d, want 3", got)
	}
	if got := z.refund(-4, 1); got != -3 {
		t.Errorf("rate 0: refund into debt = %d, want -3", got)
	}
}

func TestFromTokens(t *testing.T) {
	p := compile(Config{Rate: 10, Burst: 3})
	for _, tk := range []float64{-5, -1, 0, 0.5, 2, 3} {
		if got := p.tokens(p.fromTokens(tk, 1e9), 1e9); math.Abs(got-tk) > 1e-9 {
			t.Errorf("tokens(fromTokens(%v)) = %v", tk, got)
		}
	}
	if got := p.tokens(p.fromTokens(100, 0), 0); got != 3 {
		t.Errorf("fromTokens clamps to burst: got %v", got)
	}
	z := compile(Config{Burst: 3})
	if got := z.fromTokens(-0.5, 0); got != -1 {
		t.Errorf("rate 0 rounds a debt down: got %d", got)
	}
	if got := z.fromTokens(math.Inf(-1), 0); got != -maxTau {
		t.Errorf("rate 0 saturates a debt: got %d", got)
	}
}

func TestSaturation(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"add overflow", satAdd(eMax, 1), eMax},
		{"add underflow", satAdd(eMin, -1), eMin},
		{"add never yields retired", satAdd(math.MinInt64+5, -5), eMin},
		{"add plain", satAdd(3, -5), -2},
		{"sub overflow", satSub(eMax, -1), eMax},
		{"sub MinInt64 from positive", satSub(1, math.MinInt64), eMax},
		{"sub MinInt64 from negative", satSub(-1, math.MinInt64), math.MaxInt64},
		{"sub underflow", satSub(eMin, 1), eMin},
		{"mul overflow", satMul(1<<40, 1<<40), eMax},
		{"mul plain", satMul(3, 4), 12},
		{"mul zero", satMul(0, eMax), 0},
		{"shl overflow", satShl(1<<40, 30), eMax},
		{"shl underflow", satShl(-1<<40, 30), eMin},
		{"shl plain", satShl(-3, 2), -12},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestToDuration(t *testing.T) {
	p := params{shift: 4}
	tests := []struct {
		w    int64
		want time.Duration
	}{{-5, 0}, {0, 0}, {1, 1}, {16, 1}, {17, 2}, {32, 2}, {eMax, time.Duration(eMax>>4 + 1)}}
	for _, tt := range tests {
		if got := p.toDuration(tt.w); got != tt.want {
			t.Errorf("toDuration(%d) = %v, want %v", tt.w, got, tt.want)
		}
	}
}
