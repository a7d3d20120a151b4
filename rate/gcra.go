package rate

import (
	"math"
	"time"
)

// This file is the pure arithmetic of the bucket: no clock, no atomics. The
// state of a rate-mode bucket is one int64, E, "the time at which the bucket
// was empty": tokens(now) = min(burst, (now-E)/interval). Taking n tokens at
// now moves E to max(E, now-tau) + n*interval (tau = burst*interval); the
// caller may act once E <= now. A reservation that must wait leaves E in the
// future (a debt), which later callers see as fewer tokens.
//
// Time inside a state is counted in units of 2^-shift nanoseconds relative
// to a base (clock nanos), so that an interval below a nanosecond (rates
// above 1e9/s) keeps 16 bits of precision instead of rounding to 0 (jammed
// open) or 1 ns (jammed at 1e9/s). Offsets from the base are kept within
// ±2^61 units; a time further away moves the base (rebase), which is exact.

type mode uint8

const (
	modeRate mode = iota // GCRA: the state is E, in units
	modeZero             // no refill: the state is the number of tokens left
	modeInf              // no limit: the state is unused
)

const (
	// retired marks a state that a setter has replaced: no CAS on it can
	// succeed any more, so callers reload the bucket's current state.
	retired = math.MinInt64
	// eMin and eMax bound every stored value; eMin also means "full at any
	// time" for a fresh bucket.
	eMin = math.MinInt64 + 1
	eMax = math.MaxInt64

	maxShift   = 30      // finest unit: 2^-30 ns; the base then moves every ~2 s
	precBits   = 16      // intervals get at least 2^16 units when the range allows
	maxTau     = 1 << 60 // burst*interval, in units, stays below this
	offsetBits = 61      // |now-base| << shift stays below 2^61
)

// params is a bucket configuration compiled for arithmetic. Immutable.
type params struct {
	mode     mode
	shift    uint8
	burst    int64
	interval int64 // units per token, >= 1 (modeRate)
	tau      int64 // burst*interval units (modeRate)
	lim      int64 // max |now-base| in ns before a rebase
	maxWait  time.Duration
	rate     float64
}

// compile derives params from a validated Config.
func compile(c Config) params {
	p := params{rate: c.Rate, burst: int64(c.Burst), maxWait: c.MaxWait, lim: 1 << offsetBits}
	switch {
	case c.Rate >= Inf:
		p.mode = modeInf
		return p
	case c.Rate == 0:
		p.mode = modeZero
		return p
	}
	ns := 1e9 / c.Rate // interval in ns, may be < 1 or astronomically large
	if ns*float64(max(p.burst, 1)) > maxTau {
		// Filling the bucket would take more than 2^60 ns (36 years): it
		// effectively never refills, and its arithmetic would not fit.
		p.mode = modeZero
		return p
	}
	p.mode = modeRate
	k := 0
	for k < maxShift && ns*float64(uint64(1)<<k) < 1<<precBits &&
		ns*float64(uint64(1)<<(k+1))*float64(max(p.burst, 1)) <= maxTau {
		k++
	}
	p.shift = uint8(k)
	p.interval = max(1, int64(math.Round(ns*float64(uint64(1)<<k))))
	p.tau = p.interval * p.burst
	p.lim = 1 << (offsetBits - k)
	return p
}

// initial returns the state of a full bucket.
func (p *params) initial() int64 {
	if p.mode == modeZero {
		return p.burst
	}
	return eMin // E far in the past: full at any time
}

// take tries to take n (0 <= n <= burst) tokens at u (units since base),
// waiting at most maxWait units. It returns the new state and the wait in
// units; when !ok the state must not change and wait is how long until n
// tokens would be there (-1: never).
func (p *params) take(e, u, n, maxWait int64) (ne, wait int64, ok bool) {
	switch p.mode {
	case modeInf:
		return e, 0, true
	case modeZero:
		if e >= n {
			return e - n, 0, true
		}
		return e, -1, false
	}
	start := max(e, u-p.tau) // the clamp to burst: unused time beyond tau is lost
	ne = satAdd(start, n*p.interval)
	wait = satSub(ne, u)
	if wait > maxWait {
		return e, wait, false
	}
	return ne, max(wait, 0), true
}

// refund gives n tokens back. The clamp to burst happens when tokens are next
// read (start := max(E, now-tau)), so a refund needs no time.
func (p *params) refund(e, n int64) int64 {
	switch p.mode {
	case modeInf:
		return e
	case modeZero:
		return min(satAdd(e, n), max(p.burst, e))
	}
	return satSub(e, satMul(n, p.interval))
}

// tokens returns the tokens available at u (negative: a debt).
func (p *params) tokens(e, u int64) float64 {
	switch p.mode {
	case modeInf:
		return float64(p.burst)
	case modeZero:
		return float64(e)
	}
	if e <= u-p.tau {
		return float64(p.burst)
	}
	return float64(satSub(u, e)) / float64(p.interval)
}

// fromTokens returns the state holding tk tokens at u (tk may be negative).
func (p *params) fromTokens(tk float64, u int64) int64 {
	tk = min(tk, float64(p.burst))
	switch p.mode {
	case modeInf:
		return 0
	case modeZero:
		return int64(math.Max(math.Floor(tk), -maxTau)) // floor: never round up a debt
	}
	if tk >= float64(p.burst) {
		return u - p.tau
	}
	debt := math.Min(tk*float64(p.interval), maxTau)
	return satSub(u, int64(math.Max(debt, -maxTau)))
}

// toUnits converts ns to units, saturating.
func (p *params) toUnits(d int64) int64 { return satShl(d, p.shift) }

// toDuration converts a wait in units to a duration, rounding up so that a
// caller never acts before its tokens are there.
func (p *params) toDuration(w int64) time.Duration {
	if w <= 0 {
		return 0
	}
	d := w >> p.shift
	if w&(1<<p.shift-1) != 0 {
		d++
	}
	return time.Duration(d)
}

func satAdd(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) { // overflowed
		if b > 0 {
			return eMax
		}
		return eMin
	}
	return max(s, eMin)
}

func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return eMax
		}
		return satAdd(a+1, math.MaxInt64)
	}
	return satAdd(a, -b)
}

func satMul(a, b int64) int64 { // a, b >= 0
	if a != 0 && b > math.MaxInt64/a {
		return eMax
	}
	return a * b
}

func satShl(d int64, k uint8) int64 {
	if d > eMax>>k {
		return eMax
	}
	if d < eMin>>k {
		return eMin
	}
	return d << k
}
