// Package gcra is the token-bucket arithmetic that rate.Bucket and
// keyed.Buckets share: pure functions of one int64 state word and a time,
// with no clock, no atomics and no locks. The callers keep the word (one per
// bucket, or one per key) and decide how to make its updates atomic.
//
// # The state word
//
// In Rate mode the word is E, "the time at which the bucket was empty":
// tokens(now) = min(Burst, (now−E)/Interval). Taking n tokens at now moves E
// to max(E, now−Tau) + n·Interval (Tau = Burst·Interval); the caller may act
// once E <= now. A reservation that must wait leaves E in the future (a
// debt), which later callers see as fewer tokens. In Zero mode (no refill)
// the word is the number of tokens left; in Inf mode it is unused.
//
// # Units and the base
//
// Time inside a word is counted in units of 2^-Shift nanoseconds relative to
// a base (clock nanos) that the caller keeps next to its words, so that an
// interval below a nanosecond (rates above 1e9/s) keeps 16 bits of precision
// instead of rounding to 0 (jammed open) or 1 ns (jammed at 1e9/s). Offsets
// from the base stay within ±2^61 units: Units reports a time further away,
// and the caller then moves the base (Moved re-expresses each of its words,
// exactly while they fit), or decides without moving it (TokensFar,
// TakeFar). Every sum saturates, so no input overflows.
package gcra

import (
	"math"
	"time"
)

// Mode is how a bucket's word is read.
type Mode uint8

const (
	Rate Mode = iota // the word is E, in units
	Zero             // no refill: the word is the number of tokens left
	Inf              // no limit: the word is unused
)

const (
	// Retired is never the result of any function here: rate.Bucket marks a
	// replaced word with it, so that no compare-and-swap on it succeeds.
	Retired = math.MinInt64
	// EMin and EMax bound every word; EMin also means "full at any time".
	EMin = math.MinInt64 + 1
	EMax = math.MaxInt64

	maxShift   = 30      // finest unit: 2^-30 ns; the base then moves every ~2 s
	precBits   = 16      // intervals get at least 2^16 units when the range allows
	MaxTau     = 1 << 60 // Burst·Interval, in units, stays at or below this
	offsetBits = 61      // |now-base| << Shift stays below 2^61
)

// Params is a rate and a burst compiled for the arithmetic. It is
// immutable; its 40 bytes are all the hot path reads.
type Params struct {
	Mode     Mode
	Shift    uint8 // a unit is 2^-Shift ns (Rate mode)
	Burst    int64
	Interval int64 // units per token, >= 1 (Rate mode)
	Tau      int64 // Burst·Interval units (Rate mode)
	Lim      int64 // the largest |now-base| in ns that Units converts
}

// Compile derives Params from a rate in tokens per second (>= 0, not NaN;
// math.MaxFloat64 and +Inf mean no limit) and a burst (>= 0). Every such
// pair compiles: a rate too slow to refill the bucket within 2^60 ns (36
// years) becomes Zero mode, a rate too fast for the finest unit admits at
// most one token per unit. So does a pair that Countable refuses, so that
// no arithmetic overflows; a caller validates with Countable first.
func Compile(rate float64, burst int64) Params {
	p := compile(rate, burst)
	if p.Mode == Rate && p.Burst > MaxTau/p.Interval {
		return Params{Mode: Zero, Burst: burst, Lim: 1 << offsetBits}
	}
	return p
}

// Countable reports whether Compile counts a bucket of rate and burst as
// it is: true unless it refills within 2^60 ns but Burst·Interval exceeds
// MaxTau units. The interval is a whole number of units, at least one, and
// a larger burst allows only a coarser unit, so a huge burst can round its
// interval up past what 2^60 units hold: any Burst above 2^60, and bursts
// near MaxFill whose interval rounds up by a large fraction. (Rate 1e19
// with the largest int burst had Tau = 2^63−1, and now−Tau wrapped.)
// Compile gives such a pair no refill rather than overflow.
func Countable(rate float64, burst int64) bool {
	p := compile(rate, burst)
	return p.Mode != Rate || p.Burst <= MaxTau/p.Interval
}

func compile(rate float64, burst int64) Params {
	p := Params{Burst: burst, Lim: 1 << offsetBits}
	switch {
	case rate >= math.MaxFloat64:
		p.Mode = Inf
		return p
	case rate == 0:
		p.Mode = Zero
		return p
	}
	ns := 1e9 / rate // interval in ns, may be < 1 or astronomically large
	if ns*float64(max(p.Burst, 1)) > MaxTau {
		// Filling the bucket would take more than 2^60 ns (36 years): it
		// effectively never refills, and its arithmetic would not fit.
		p.Mode = Zero
		return p
	}
	p.Mode = Rate
	k := 0
	for k < maxShift && ns*float64(uint64(1)<<k) < 1<<precBits &&
		ns*float64(uint64(1)<<(k+1))*float64(max(p.Burst, 1)) <= MaxTau {
		k++
	}
	p.Shift = uint8(k)
	// Rounded up, so that the bucket is never faster than rate: rounded to
	// nearest, an interval short by a fraction of a unit admitted up to
	// 2^-17 more than Rate·t + Burst (a token in 2^17), and nearly half
	// again at the finest unit. The quotient is rounded up exactly (the
	// FMA's sign is the exact remainder's), so an exact interval (rate
	// 1e9/3: 3 ns) stays exact and a float quotient rounded down, as
	// above 2^53 units, is not taken for the ceiling.
	x := 1e9 * float64(uint64(1)<<k)
	q := x / rate
	if math.FMA(-q, rate, x) > 0 {
		q = math.Nextafter(q, math.Inf(1))
	}
	p.Interval = max(1, int64(math.Ceil(q)))
	p.Tau = p.Interval * p.Burst // wraps when !Countable: Compile drops it
	p.Lim = 1 << (offsetBits - k)
	return p
}

// Initial returns the word of a full bucket, full whatever the time.
func (p *Params) Initial() int64 {
	if p.Mode == Zero {
		return p.Burst
	}
	return EMin // E far in the past: full at any time
}

// Take tries to take n (0 <= n <= Burst) tokens at u (units since the base),
// waiting at most maxWait units. It returns the new word and the wait in
// units; when !ok the word must not change and wait is how long until n
// tokens would be there (-1: never).
func (p *Params) Take(e, u, n, maxWait int64) (ne, wait int64, ok bool) {
	switch p.Mode {
	case Inf:
		return e, 0, true
	case Zero:
		if e >= n {
			return e - n, 0, true
		}
		return e, -1, false
	}
	start := max(e, u-p.Tau) // the clamp to burst: unused time beyond Tau is lost
	ne = satAdd(start, n*p.Interval)
	wait = satSub(ne, u)
	if wait > maxWait {
		return e, wait, false
	}
	return ne, max(wait, 0), true
}

// TakeOne is Take(e, u, 1, 0) in Rate mode, small enough to inline: the
// common admission (rate.Bucket.Allow). ok reports that the token is there
// at u; when !ok the word must not change, and SatSub(ne, u) is the wait.
func (p *Params) TakeOne(e, u int64) (ne int64, ok bool) {
	ne = satAdd(max(e, u-p.Tau), p.Interval) // |u| <= 2^61, Tau <= 2^60 (Compile): no overflow
	return ne, ne <= u
}

// Refund gives n tokens back. The clamp to the burst happens when tokens are
// next read (start := max(E, now−Tau)), so a refund needs no time.
func (p *Params) Refund(e, n int64) int64 {
	switch p.Mode {
	case Inf:
		return e
	case Zero:
		return min(satAdd(e, n), max(p.Burst, e))
	}
	return satSub(e, satMul(n, p.Interval))
}

// Tokens returns the tokens available at u (negative: a debt).
func (p *Params) Tokens(e, u int64) float64 {
	switch p.Mode {
	case Inf:
		return float64(p.Burst)
	case Zero:
		return float64(e)
	}
	if e <= u-p.Tau {
		return float64(p.Burst)
	}
	return float64(satSub(u, e)) / float64(p.Interval)
}

// Full reports whether the bucket of word e is full at u, so that dropping
// its word for Initial loses nothing, and has been for at least idle ns. In
// Inf mode a bucket is always full; in Zero mode it is full while nothing
// has been taken, and idle is not counted (the word keeps no time).
func (p *Params) Full(e, u int64, idle time.Duration) bool {
	switch p.Mode {
	case Inf:
		return true
	case Zero:
		return e >= p.Burst
	}
	return e <= satSub(u, satAdd(p.Tau, p.ToUnits(int64(idle))))
}

// FromTokens returns the word holding tk tokens at u (tk may be negative).
func (p *Params) FromTokens(tk float64, u int64) int64 {
	tk = min(tk, float64(p.Burst))
	switch p.Mode {
	case Inf:
		return 0
	case Zero:
		return int64(math.Max(math.Floor(tk), -MaxTau)) // floor: never round up a debt
	}
	if tk >= float64(p.Burst) {
		return u - p.Tau
	}
	// Floor, as in Zero mode: int64() rounded a debt toward zero, and
	// each setter forgave up to a unit of it.
	units := math.Floor(tk * float64(p.Interval))
	return satSub(u, int64(math.Max(math.Min(units, MaxTau), -MaxTau)))
}

// Units converts now (clock nanos) to units since base, or reports that base
// is too far from now and must move (see Moved). Only Rate mode keeps time:
// in the others every time is 0.
func (p *Params) Units(now, base int64) (int64, bool) {
	if p.Mode != Rate {
		return 0, true
	}
	// One compare for the range (Lim <= 2^61, so 2·Lim fits) and one for
	// an overflowing subtraction keep this cheap enough to inline: it is
	// on every admission.
	off := now - base
	if (now^base)&(now^off) < 0 || uint64(off+p.Lim) > uint64(2*p.Lim) {
		return 0, false
	}
	return off << p.Shift, true
}

// Moved returns word w, kept relative to base from, re-expressed relative to
// base to, and whether that is exact. It is not when the word does not fit
// relative to to (the bases are more than 2^63 units apart, less E's own
// offset): Moved then returns EMax, or EMin+1 rather than EMin, which would
// say the bucket had been full forever. Saturating the shift alone, as it
// once did, kept a wrong finite word, and moving back was then off by the
// whole distance. Callers that must stay exact use TakeFar and TokensFar
// instead (see far.go).
func (p *Params) Moved(w, from, to int64) (int64, bool) {
	if p.Mode != Rate || w == EMin {
		return w, true
	}
	d := p.rel(w, from, to) // w − (to−from)·2^Shift
	if !d.fits() || int64(d.lo) < EMin {
		return max(d.clamp(), EMin+1), false
	}
	return int64(d.lo), true
}

// ToUnits converts ns to units, saturating.
func (p *Params) ToUnits(d int64) int64 { return satShl(d, p.Shift) }

// ToDuration converts a wait in units to a duration, rounding up so that a
// caller never acts before its tokens are there.
func (p *Params) ToDuration(w int64) time.Duration {
	if w <= 0 {
		return 0
	}
	d := w >> p.Shift
	if w&(1<<p.Shift-1) != 0 {
		d++
	}
	return time.Duration(d)
}

// SatSub is a−b, saturating to [EMin, EMax].
func SatSub(a, b int64) int64 { return satSub(a, b) }

func satAdd(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) { // overflowed
		if b > 0 {
			return EMax
		}
		return EMin
	}
	return max(s, EMin)
}

func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return EMax
		}
		return satAdd(a+1, math.MaxInt64)
	}
	return satAdd(a, -b)
}

func satMul(a, b int64) int64 { // a, b >= 0
	if a != 0 && b > math.MaxInt64/a {
		return EMax
	}
	return a * b
}

func satShl(d int64, k uint8) int64 {
	if d > EMax>>k {
		return EMax
	}
	if d < EMin>>k {
		return EMin
	}
	return d << k
}

// Remaining returns what is left of the bucket's quota for the IETF
// RateLimit field: the whole tokens in it (none while in debt) and the
// time until it is full again, a debt paid, rounded up, -1 if never (no refill: Zero
// mode). A bucket of unlimited rate (Inf) has its burst, at once. Callers
// call it on the Params they keep: compiling the rate and burst again for
// each reading was most of the RateLimit field's cost (docs/benchmarks.md,
// "The RateLimit field's reading").
//
// The time is that of the compiled bucket, whole units a token: at 7/s a
// token takes 142,857,143 ns, and a reset of missing/rate (1 s for 7
// tokens) came before the bucket was full.
func (p Params) Remaining(tokens float64) (remaining int, reset time.Duration) {
	if p.Mode == Inf {
		return int(p.Burst), 0
	}
	remaining = int(max(tokens, 0))
	// In debt (reservations waiting), the tokens that come first are
	// theirs: full again only once the debt is paid too. Counted from an
	// empty bucket, the reset sent a client back while the bucket still
	// owed them (rate 1, burst 3, a debt of 4: 3 s, full at 7 s).
	missing := float64(p.Burst) - tokens
	if missing <= 0 {
		return int(p.Burst), 0
	}
	if p.Mode != Rate {
		return remaining, -1 // no refill: the quota never comes back
	}
	// The units until full are a whole number, Tau+E−now. The float64
	// tokens, the difference and the product miss it by at most 2^-51 of
	// it: rounding finds it below 2^50, and above that a pad keeps the
	// reset from coming early. A debt as long as time saturates.
	f := missing * float64(p.Interval)
	if f >= 1<<62 {
		return remaining, time.Duration(math.MaxInt64)
	}
	units := int64(math.Round(f))
	if big := max(p.Tau, units); big >= 1<<50 {
		units += big >> 49
	}
	return remaining, time.Duration((units + 1<<p.Shift - 1) >> p.Shift)
}
