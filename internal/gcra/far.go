package gcra

import (
	"math"
	"math/bits"
	"time"
)

// Far times.
//
// A word counts units from its base, and Units converts only times within
// ±2^61 units of it. A time further away used to move the base there first
// (Moved), but a word need not fit relative to the new base: E more than
// 2^63 units (8.6 s at the finest unit, 292 years at the coarsest) from the
// new base was saturated, and moving back was off by however far the base
// had gone. So far times are computed here without moving anything, in 128
// bits: TokensFar reads at any time, and TakeFar decides a take whose new
// word always fits exactly, in one base or the other.

// wide is a two's-complement 128-bit integer; only the far-time arithmetic
// needs one, and its values stay below 2^96 in magnitude.
type wide struct {
	hi int64
	lo uint64
}

func widen(x int64) wide { return wide{x >> 63, uint64(x)} }

func (a wide) sub(b wide) wide {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	return wide{a.hi - b.hi - int64(borrow), lo}
}

func (a wide) shl(k uint8) wide {
	if k == 0 {
		return a
	}
	return wide{a.hi<<k | int64(a.lo>>(64-k)), a.lo << k}
}

// fits reports whether a is an int64.
func (a wide) fits() bool { return a.hi == int64(a.lo)>>63 }

// clamp returns a as an int64, or the nearest of EMin and EMax.
func (a wide) clamp() int64 {
	switch {
	case a.fits():
		return max(int64(a.lo), EMin)
	case a.hi < 0:
		return EMin
	}
	return EMax
}

// float returns a rounded to a float64 (beyond an int64, within 2^-52).
func (a wide) float() float64 {
	if a.fits() {
		return float64(int64(a.lo))
	}
	return float64(a.hi)*(1<<64) + float64(a.lo)
}

// rel returns word w, kept relative to base, relative to now (clock nanos):
// w − (now−base)·2^Shift, exactly.
func (p *Params) rel(w, base, now int64) wide {
	return widen(w).sub(widen(now).sub(widen(base)).shl(p.Shift))
}

// ceilNanos returns a wait in units as nanoseconds, rounded up (as
// ToDuration does) and saturated to the longest Duration; 0 when a <= 0.
func (a wide) ceilNanos(k uint8) time.Duration {
	if a.hi < 0 || (a.hi == 0 && a.lo == 0) {
		return 0
	}
	// a >> k, then +1 if any bit shifted out was set.
	lo := a.lo>>k | uint64(a.hi)<<(64-k) // a shift by 64 is 0
	hi := a.hi >> k
	if a.lo&(1<<k-1) != 0 {
		var carry uint64
		lo, carry = bits.Add64(lo, 1, 0)
		hi += int64(carry)
	}
	if hi != 0 || lo > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(lo)
}

// TokensFar is Tokens at now (clock nanos), whatever its distance from
// base: it needs no base near now, so a read never moves one, and it does
// not saturate a debt.
func (p *Params) TokensFar(e, base, now int64) float64 {
	if p.Mode != Rate {
		return p.Tokens(e, 0)
	}
	if e == EMin {
		return float64(p.Burst)
	}
	d := p.rel(e, base, now) // E−now: −d/Interval tokens, unless full
	if d.clamp() <= -p.Tau {
		return float64(p.Burst)
	}
	return widen(0).sub(d).float() / float64(p.Interval) // not −d.float(): no −0
}

// TakeFar is Take at now (clock nanos) in Rate mode, for a now that Units
// cannot convert and relative to which word e does not fit (Moved reports
// it inexact); in any other case a move and Take do the same, faster. The
// new word is exact, in one of two bases: when the bucket is full at now,
// the take forgets E and ne counts from now (moved: the caller moves its
// base to now); otherwise ne = E + n·Interval, counted from base as E was.
// wait is in nanoseconds, rounded up and saturated. When !ok the word must
// not change, and wait is how long until n tokens would be there.
func (p *Params) TakeFar(e, base, now, n int64, maxWait time.Duration) (ne int64, moved bool, wait time.Duration, ok bool) {
	if e == EMin || p.rel(e, base, now).clamp() <= -p.Tau {
		// Full at now: start at now−Tau, in now's base; n·Interval <= Tau
		// (n <= Burst) and Tau <= 2^60, so this fits.
		ne = n*p.Interval - p.Tau
		wait = p.ToDuration(ne)
		if wait > maxWait {
			return e, false, wait, false
		}
		return ne, true, wait, true
	}
	// E is after now−Tau, so the take starts at E and needs no base near
	// now: only its wait does, and that is computed in 128 bits.
	ne = satAdd(e, n*p.Interval)
	wait = p.rel(ne, base, now).ceilNanos(p.Shift)
	if wait > maxWait {
		return e, false, wait, false
	}
	return ne, false, wait, true
}
