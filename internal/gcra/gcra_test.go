package gcra

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		burst    int64
		mode     Mode
		shift    uint8
		interval int64
	}{
		{"zero config", 0, 0, Zero, 0, 0},
		{"rate 0", 0, 5, Zero, 0, 0},
		{"inf", math.MaxFloat64, 5, Inf, 0, 0},
		{"+Inf", math.Inf(1), 0, Inf, 0, 0},
		{"1/s", 1, 1, Rate, 0, 1e9},
		{"1000/s", 1000, 10, Rate, 0, 1e6},
		{"1e6/s gets sub-ns units", 1e6, 10, Rate, 7, 1000 << 7},
		{"1e9/s", 1e9, 1, Rate, 16, 1 << 16},
		{"1e10/s: 0.1 ns per token", 1e10, 1, Rate, 20, 104858},
		{"1e18/s hits the finest unit, rounded up", 1e18, 1, Rate, 30, 2},
		{"2^30·1e9/s: one unit a token", 1e9 * (1 << 30), 1, Rate, 30, 1},
		{"1e300/s never rounds to 0", 1e300, 1, Rate, 30, 1},
		{"1e-9/s, burst 1: 31 years per token", 1e-9, 1, Rate, 0, 1e18},
		{"1e-9/s, burst 2: would overflow, never refills", 1e-9, 2, Zero, 0, 0},
		{"1e-300/s", 1e-300, 1, Zero, 0, 0},
		{"smallest float", math.SmallestNonzeroFloat64, 1, Zero, 0, 0},
		{"huge burst limits the shift", 1e9, 1 << 50, Rate, 10, 1 << 10},
		{"max burst", 1, math.MaxInt, Zero, 0, 0},
		{"max burst at 1e19/s: not countable, no refill", 1e19, math.MaxInt, Zero, 0, 0},
		{"2^60 burst at 1e19/s: one unit a token", 1e19, 1 << 60, Rate, 30, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Compile(tt.rate, tt.burst)
			if p.Mode != tt.mode || p.Shift != tt.shift || p.Interval != tt.interval {
				t.Fatalf("compile = mode %d shift %d interval %d, want mode %d shift %d interval %d",
					p.Mode, p.Shift, p.Interval, tt.mode, tt.shift, tt.interval)
			}
			if p.Mode == Rate {
				if p.Tau > MaxTau || p.Tau != p.Interval*p.Burst {
					t.Fatalf("tau %d out of range", p.Tau)
				}
				if p.Lim<<p.Shift != 1<<offsetBits {
					t.Fatalf("lim %d inconsistent with shift %d", p.Lim, p.Shift)
				}
			}
		})
	}
}

// No pair compiles to a Tau beyond MaxTau, which keeps now−Tau from
// wrapping; Countable names the pairs that would, and only those lose
// their refill.
func TestCompileTauFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		rate := math.Pow(10, rng.Float64()*40-20)
		burst := int64(math.Pow(2, rng.Float64()*63)) - 1
		p := Compile(rate, burst)
		if p.Mode == Rate && (p.Tau < 0 || p.Tau > MaxTau || p.Tau != p.Interval*p.Burst) {
			t.Fatalf("Compile(%g, %d): Tau = %d, Interval %d", rate, burst, p.Tau, p.Interval)
		}
		refills := rate*MaxTau/1e9 >= float64(max(burst, 1)) // fills within 2^60 ns
		if c := Countable(rate, burst); c != (p.Mode == Rate || !refills) {
			t.Fatalf("Compile(%g, %d) is mode %d, Countable = %v", rate, burst, p.Mode, c)
		}
	}
	if Countable(1e19, math.MaxInt64) || !Countable(1e19, 1<<60) || Countable(1e19, 1<<60+1) {
		t.Error("at 1e19/s the burst must fit in 2^60 units of one a token")
	}
}

// The effective rate, 1e9*2^shift/interval, must match the configured one
// to 2^-17 wherever the fixed point has room.
func TestCompilePrecision(t *testing.T) {
	for _, r := range []float64{1e-6, 0.3, 1, 3, 7, 333, 3e4, 1.2345e5, 1e6, 3e8, 1e9, 2.5e9, 1e10, 7.7e11, 1e13} {
		p := Compile(r, 1000)
		eff := 1e9 * float64(uint64(1)<<p.Shift) / float64(p.Interval)
		if rel := math.Abs(eff-r) / r; rel > 1.0/(1<<17) {
			t.Errorf("rate %g: effective %g, relative error %.2g", r, eff, rel)
		}
	}
}

// The compiled rate, 1e9·2^Shift/Interval tokens a second, is never above
// the configured one: a bucket admits at most Rate·t + Burst over any t.
// A rounded interval (3/s: 333,333,333 ns) admitted up to 2^-17 more, a
// token too many after 2^17 drained, and at 8e17/s a third more.
func TestCompileNeverFaster(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	rates := []float64{3, 7e8, 1e9 / 1.4, 1e12 / 7, 8e17, 1e18}
	for range 100_000 {
		rates = append(rates, math.Pow(10, rng.Float64()*30-10))
	}
	for _, r := range rates {
		for _, burst := range []int64{1, 1000, 1 << 31, 1 << 50} {
			p := Compile(r, burst)
			if p.Mode != Rate {
				continue
			}
			// The tokens of one interval's worth of whole units, in
			// exact arithmetic: 1e9·2^Shift/Interval <= r.
			eff := new(big.Float).SetPrec(200).SetInt64(1e9)
			eff.SetMantExp(eff, int(p.Shift)).Quo(eff, new(big.Float).SetInt64(p.Interval))
			if eff.Cmp(big.NewFloat(r)) > 0 {
				f, _ := eff.Float64()
				t.Fatalf("Compile(%g, %d): shift %d interval %d, %.17g tokens/s", r, burst, p.Shift, p.Interval, f)
			}
		}
	}
}

func TestTake(t *testing.T) {
	p := Compile(10, 3) // 100ms per token, tau 300ms
	const ms = int64(time.Millisecond)
	tests := []struct {
		name         string
		e, u, n, max int64
		ne, wait     int64
		ok           bool
	}{
		{"full bucket", EMin, 1000 * ms, 1, 0, 800 * ms, 0, true},
		{"full bucket, whole burst", EMin, 1000 * ms, 3, 0, 1000 * ms, 0, true},
		{"empty, no wait allowed", 1000 * ms, 1000 * ms, 1, 0, 1000 * ms, 100 * ms, false},
		{"empty, wait allowed", 1000 * ms, 1000 * ms, 1, 100 * ms, 1100 * ms, 100 * ms, true},
		{"empty, wait one short", 1000 * ms, 1000 * ms, 1, 100*ms - 1, 1000 * ms, 100 * ms, false},
		{"debt adds up", 1200 * ms, 1000 * ms, 2, time.Hour.Nanoseconds(), 1400 * ms, 400 * ms, true},
		{"partial refill", 1000 * ms, 1150 * ms, 1, 0, 1100 * ms, 0, true},
		{"time went back: fewer tokens", 1000 * ms, 900 * ms, 1, 0, 1000 * ms, 200 * ms, false},
		{"saturated debt stays saturated", EMax, 0, 1, EMax, EMax, EMax, true},
		{"n 0", 1000 * ms, 1000 * ms, 0, 0, 1000 * ms, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ne, wait, ok := p.Take(tt.e, tt.u, tt.n, tt.max)
			if ne != tt.ne || wait != tt.wait || ok != tt.ok {
				t.Fatalf("take = (%d, %d, %v), want (%d, %d, %v)", ne, wait, ok, tt.ne, tt.wait, tt.ok)
			}
		})
	}
}

func TestRefundAndTokens(t *testing.T) {
	p := Compile(10, 3)
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
		{"refund on a full bucket", EMin, 3, 1000 * ms, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Tokens(p.Refund(tt.e, tt.n), tt.u); got != tt.tokens {
				t.Fatalf("tokens after refund = %v, want %v", got, tt.tokens)
			}
		})
	}
	z := Compile(0, 3)
	if got := z.Refund(2, 5); got != 3 {
		t.Errorf("rate 0: refund over burst = %d, want 3", got)
	}
	if got := z.Refund(-4, 1); got != -3 {
		t.Errorf("rate 0: refund into debt = %d, want -3", got)
	}
}

func TestFromTokens(t *testing.T) {
	p := Compile(10, 3)
	for _, tk := range []float64{-5, -1, 0, 0.5, 2, 3} {
		if got := p.Tokens(p.FromTokens(tk, 1e9), 1e9); math.Abs(got-tk) > 1e-9 {
			t.Errorf("tokens(fromTokens(%v)) = %v", tk, got)
		}
	}
	if got := p.Tokens(p.FromTokens(100, 0), 0); got != 3 {
		t.Errorf("fromTokens clamps to burst: got %v", got)
	}
	// A fraction of a unit rounds down, a debt included: toward zero, each
	// setter forgave part of it.
	q := Compile(3, 10) // 333,333,334 ns a token
	for _, tk := range []float64{-2.5, -0.1, 0.1, 2.5} {
		if got := q.Tokens(q.FromTokens(tk, 0), 0); got > tk {
			t.Errorf("fromTokens(%v) holds %.17g tokens", tk, got)
		}
	}
	z := Compile(0, 3)
	if got := z.FromTokens(-0.5, 0); got != -1 {
		t.Errorf("rate 0 rounds a debt down: got %d", got)
	}
	if got := z.FromTokens(math.Inf(-1), 0); got != -MaxTau {
		t.Errorf("rate 0 saturates a debt: got %d", got)
	}
}

func TestSaturation(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"add overflow", satAdd(EMax, 1), EMax},
		{"add underflow", satAdd(EMin, -1), EMin},
		{"add never yields retired", satAdd(math.MinInt64+5, -5), EMin},
		{"add plain", satAdd(3, -5), -2},
		{"sub overflow", satSub(EMax, -1), EMax},
		{"sub MinInt64 from positive", satSub(1, math.MinInt64), EMax},
		{"sub MinInt64 from negative", satSub(-1, math.MinInt64), math.MaxInt64},
		{"sub underflow", satSub(EMin, 1), EMin},
		{"mul overflow", satMul(1<<40, 1<<40), EMax},
		{"mul plain", satMul(3, 4), 12},
		{"mul zero", satMul(0, EMax), 0},
		{"shl overflow", satShl(1<<40, 30), EMax},
		{"shl underflow", satShl(-1<<40, 30), EMin},
		{"shl plain", satShl(-3, 2), -12},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestToDuration(t *testing.T) {
	p := Params{Shift: 4}
	tests := []struct {
		w    int64
		want time.Duration
	}{{-5, 0}, {0, 0}, {1, 1}, {16, 1}, {17, 2}, {32, 2}, {EMax, time.Duration(EMax>>4 + 1)}}
	for _, tt := range tests {
		if got := p.ToDuration(tt.w); got != tt.want {
			t.Errorf("toDuration(%d) = %v, want %v", tt.w, got, tt.want)
		}
	}
}

func TestUnits(t *testing.T) {
	p := Compile(1e9, 1) // shift 16: 2^45 ns either side of the base
	tests := []struct {
		name      string
		now, base int64
		u         int64
		in        bool
	}{
		{"at the base", 5, 5, 0, true},
		{"after", 7, 5, 2 << 16, true},
		{"before", 3, 5, -2 << 16, true},
		{"at the limit", 1 << 45, 0, 1 << 61, true},
		{"past the limit", 1<<45 + 1, 0, 0, false},
		{"far before", math.MinInt64, math.MaxInt64, 0, false},
	}
	for _, tt := range tests {
		if u, in := p.Units(tt.now, tt.base); u != tt.u || in != tt.in {
			t.Errorf("%s: Units = (%d, %v), want (%d, %v)", tt.name, u, in, tt.u, tt.in)
		}
	}
	z := Compile(0, 3)
	if u, in := z.Units(math.MaxInt64, math.MinInt64); u != 0 || !in {
		t.Errorf("rate 0 keeps no time: Units = (%d, %v), want (0, true)", u, in)
	}
}

// Moving the base keeps the tokens a word stands for, exactly.
func TestMoved(t *testing.T) {
	p := Compile(1e12, 1<<20) // 1,000 tokens a ns; the base reaches ±34 s
	const from, to = int64(1_000), int64(1_000 + 20e9)
	for _, tk := range []float64{-5000, -1, 0, 1, 17, 1 << 19} {
		u0, _ := p.Units(to, from)
		e := p.FromTokens(tk, u0) // tk tokens at time to
		uOld, in1 := p.Units(to+3, from)
		uNew, in2 := p.Units(to+3, to)
		if !in1 || !in2 {
			t.Fatal("times not convertible")
		}
		moved, exact := p.Moved(e, from, to)
		before, after := p.Tokens(e, uOld), p.Tokens(moved, uNew)
		if !exact || before != after || math.Abs(before-min(tk+3000, 1<<20)) > 3000.0/(1<<17) { // the rate is exact to 2^-17
			t.Errorf("%v tokens, 3 ns later: %v with the old base, %v with the new", tk, before, after)
		}
	}
	if got, exact := p.Moved(EMin, from, to); got != EMin || !exact {
		t.Errorf("a full-forever word moved to %d (exact %v)", got, exact)
	}
	if got, exact := p.Moved(0, math.MaxInt64, math.MinInt64); got != EMax || exact {
		t.Errorf("a move beyond the range gave %d (exact %v), want it saturated to %d, inexact", got, exact, EMax)
	}
}

// A word that does not fit relative to the new base is reported inexact and
// clamped, never kept as a wrong finite word: saturating the shift alone
// moved a 1e9/s bucket's word an hour (its offset from the old base) off,
// and a read 72 h ahead and back left the bucket an hour in debt.
func TestMovedFarIsReportedInexact(t *testing.T) {
	p := Compile(1e9, 10) // shift 16: a word spans ±39 h
	hour := int64(time.Hour)
	e := p.ToUnits(hour) // drained an hour after the base
	ahead, exact := p.Moved(e, 0, hour+72*hour)
	if exact || ahead != EMin+1 {
		t.Errorf("72 h ahead: Moved = %d, %v; want EMin+1 (not full forever), inexact", ahead, exact)
	}
	back, exact := p.Moved(e, 0, hour-72*hour)
	if exact || back != EMax {
		t.Errorf("72 h back: Moved = %d, %v; want EMax, inexact", back, exact)
	}
	if got, exact := p.Moved(e, 0, 30*hour); !exact || got != e-p.ToUnits(30*hour) {
		t.Errorf("30 h ahead (fits): Moved = %d, %v; want %d, exact", got, exact, e-p.ToUnits(30*hour))
	}
}

// farRef is the far-time arithmetic in arbitrary precision: E relative to
// now (clock nanos), in units.
func farRef(p *Params, e, base, now int64) *big.Int {
	u := new(big.Int).Sub(big.NewInt(now), big.NewInt(base))
	u.Lsh(u, uint(p.Shift))
	return u.Sub(big.NewInt(e), u)
}

// farTimes draws words and times at every distance, most of them further
// than Units converts.
func farTimes(rng *rand.Rand, p *Params) (e, base, now int64) {
	base = rng.Int64() - rng.Int64()
	now = base + rng.Int64N(8*p.Lim+1) - 4*p.Lim
	if rng.IntN(4) == 0 {
		now = rng.Int64() - rng.Int64() // anywhere, up to 2^64 ns away
	}
	switch rng.IntN(4) {
	case 0:
		e = EMin
	case 1:
		e = rng.Int64() - rng.Int64()
	default: // near now, where the answer is not just full or empty
		r := farRef(p, 0, base, now)
		r.Neg(r).Add(r, big.NewInt(rng.Int64N(4*p.Tau+1)-2*p.Tau))
		if !r.IsInt64() || r.Int64() < EMin {
			e = EMax
		} else {
			e = r.Int64()
		}
	}
	return e, base, now
}

// TokensFar and TakeFar at any distance match the arithmetic done in
// arbitrary precision; near the base they match Tokens and Take.
func TestFarMatchesExactArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, rate := range []float64{1e-3, 1, 1e6, 1e9, 1e12, 1e19} {
		for _, burst := range []int64{1, 10, 1 << 20} {
			p := Compile(rate, burst)
			if p.Mode != Rate {
				continue
			}
			for range 20_000 {
				e, base, now := farTimes(rng, &p)
				d := farRef(&p, e, base, now) // E − now
				full := e == EMin || d.Cmp(big.NewInt(-p.Tau)) <= 0
				want := float64(burst)
				if !full {
					want, _ = new(big.Float).Quo(new(big.Float).SetInt(d), big.NewFloat(-float64(p.Interval))).Float64()
				}
				if got := p.TokensFar(e, base, now); math.Abs(got-want) > math.Abs(want)*1e-15 {
					t.Fatalf("rate %g burst %d: TokensFar(%d, %d, %d) = %v, want %v", rate, burst, e, base, now, got, want)
				}

				n := 1 + rng.Int64N(burst)
				maxWait := time.Duration(rng.Int64N(1 << 62))
				if rng.IntN(2) == 0 {
					maxWait = 0
				}
				ne, moved, wait, ok := p.TakeFar(e, base, now, n, maxWait)
				// The new word and the wait, in arbitrary precision.
				var wantNe, waitU *big.Int
				if full {
					wantNe = big.NewInt(n*p.Interval - p.Tau) // from now
					waitU = wantNe
				} else {
					wantNe = big.NewInt(satAdd(e, n*p.Interval)) // from base
					waitU = farRef(&p, wantNe.Int64(), base, now)
				}
				// ceil(waitU / 2^Shift), at least 0, at most MaxInt64
				wn := new(big.Int).Add(waitU, big.NewInt(1<<p.Shift-1))
				wn.Rsh(wn, uint(p.Shift))
				wantWait := time.Duration(math.MaxInt64)
				if wn.Sign() <= 0 {
					wantWait = 0
				} else if wn.IsInt64() {
					wantWait = time.Duration(wn.Int64())
				}
				wantOk := wantWait <= maxWait
				if !wantOk {
					wantNe, full = big.NewInt(e), false
				}
				if ok != wantOk || wait != wantWait || moved != full || ne != wantNe.Int64() {
					t.Fatalf("rate %g burst %d: TakeFar(%d, %d, %d, %d, %v) = %d, %v, %v, %v; want %d, %v, %v, %v",
						rate, burst, e, base, now, n, maxWait, ne, moved, wait, ok, wantNe, full, wantWait, wantOk)
				}
				if u, in := p.Units(now, base); in && !moved {
					ne1, wu, ok1 := p.Take(e, u, n, p.ToUnits(int64(maxWait)))
					if ok1 != ok || ne1 != ne || (wu < EMax && p.ToDuration(wu) != wait) { // Take saturates a wait
						t.Fatalf("near the base: Take = %d %d %v, TakeFar = %d %v %v", ne1, wu, ok1, ne, wait, ok)
					}
				}
			}
		}
	}
}

func TestFull(t *testing.T) {
	p := Compile(10, 3) // tau 300ms
	const ms = int64(time.Millisecond)
	tests := []struct {
		name string
		e, u int64
		idle time.Duration
		want bool
	}{
		{"full just now, no idle asked", 700 * ms, 1000 * ms, 0, true},
		{"one token short", 701 * ms, 1000 * ms, 0, false},
		{"full for exactly idle", 600 * ms, 1000 * ms, 100 * time.Millisecond, true},
		{"full for less than idle", 600 * ms, 1000 * ms, 101 * time.Millisecond, false},
		{"full forever", EMin, 0, time.Duration(math.MaxInt64), true},
		{"in debt", 2000 * ms, 1000 * ms, 0, false},
	}
	for _, tt := range tests {
		if got := p.Full(tt.e, tt.u, tt.idle); got != tt.want {
			t.Errorf("%s: Full = %v, want %v", tt.name, got, tt.want)
		}
	}
	z := Compile(0, 3)
	if !z.Full(3, 0, time.Hour) || z.Full(2, 0, 0) {
		t.Error("rate 0: full is exactly burst tokens left")
	}
	if inf := Compile(math.Inf(1), 0); !inf.Full(0, 0, time.Hour) {
		t.Error("Inf: a bucket is always full")
	}
}

// TakeOne is Take of one token with no wait, in Rate mode, for any word
// and any time Units can return, including saturated words.
func TestTakeOneIsTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, rate := range []float64{1e-6, 1, 10, 1e3, 1e9, 1e12, 1e15, 1e19} {
		for _, burst := range []int64{1, 2, 100, 1 << 20} {
			p := Compile(rate, burst)
			if p.Mode != Rate {
				continue
			}
			for range 20_000 {
				u := rng.Int64N(2*p.Lim) - p.Lim
				u <<= p.Shift
				var e int64
				switch rng.IntN(4) {
				case 0:
					e = p.Initial()
				case 1:
					e = EMax
				default:
					e = u + rng.Int64N(4*p.Tau+2*p.Interval+1) - 2*p.Tau
				}
				ne, wait, ok := p.Take(e, u, 1, 0)
				ne1, ok1 := p.TakeOne(e, u)
				if ok1 != ok || (ok && ne1 != ne) || (!ok && SatSub(ne1, u) != wait) {
					t.Fatalf("rate %g burst %d e %d u %d: Take = %d %d %v, TakeOne = %d %v", rate, burst, e, u, ne, wait, ok, ne1, ok1)
				}
			}
		}
	}
}

// Remaining's reset is when the bucket the arithmetic keeps is full again,
// never before, a debt included: a client that waits it out finds the
// whole burst. (In debt it was counted from an empty bucket.) It was
// worked out from the configured rate, but the bucket refills at whole
// units a token: at 7/s (142,857,143 ns a token) a burst of 7 is full at
// 1.000000001 s, and the reset said 1 s.
func TestRemainingResetIsWhenFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	rates := []float64{7, 3, 1e9 / 1.4, 1e12 / 7}
	for range 20_000 {
		rates = append(rates, math.Pow(10, rng.Float64()*22-9))
	}
	for _, r := range rates {
		burst := []int64{1, 7, 1000, 1 << 31}[rng.IntN(4)]
		p := Compile(r, burst)
		if p.Mode != Rate {
			continue
		}
		e := -rng.Int64N(p.Tau + 1) // 0 to burst tokens at u = 0
		if p.Tau < 1<<60 && rng.IntN(2) == 0 {
			e = rng.Int64N(2*p.Tau + 1) // in debt, up to two bursts
		}
		if r == 7 {
			e = 0 // empty
		}
		_, reset := p.Remaining(p.Tokens(e, 0))
		if reset < 0 {
			continue
		}
		if tk := p.Tokens(e, p.ToUnits(int64(reset))); tk != float64(burst) {
			t.Fatalf("rate %g burst %d: %v tokens at the reset %v", r, burst, tk, reset)
		}
		// Not much later either: the float64 tokens are exact to 2^-52.
		early := int64(reset) - 2 - ((p.Tau+max(e, 0))>>48)>>p.Shift
		if early > 0 && p.Tokens(e, p.ToUnits(early)) == float64(burst) {
			t.Fatalf("rate %g burst %d: full at %v, before the reset %v", r, burst, time.Duration(early), reset)
		}
	}
}
