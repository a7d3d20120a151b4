package adaptive

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// maxLimit bounds InitialLimit, MinLimit and MaxLimit: a limit is kept as a
// float64 and returned as an int, and past 2^63 that conversion wraps to a
// negative limit. 2^31 − 1 is far past any concurrency a process runs.
const maxLimit = math.MaxInt32

// Defaults shared by the three algorithms. MinLimit is 1, not Netflix's 20:
// a floor of 20 defeats the limit of any service whose capacity is below 20
// in-flight requests (seed 003's origin has 7 workers).
const (
	defaultInitialLimit = 20
	defaultMinLimit     = 1
	defaultMaxLimit     = 1000
)

// invalid is the error for a bad field: a *sluice.ConfigError, which
// matches sluice.ErrInvalidConfig.
func invalid(typ, field string, v any, want string) error {
	return sluice.NewConfigError("adaptive", typ+"."+field, v, "must be "+want)
}

// bounds holds the limits every algorithm shares, defaulted and validated.
type bounds struct{ min, max float64 }

// resolveBounds applies the defaults to (initial, min, max) and checks them;
// typ names the config type in errors.
func resolveBounds(typ string, initial, minL, maxL int) (float64, bounds, error) {
	var b bounds
	for _, f := range []struct {
		name string
		v    int
	}{{"InitialLimit", initial}, {"MinLimit", minL}, {"MaxLimit", maxL}} {
		if f.v < 0 || f.v > maxLimit {
			return 0, b, invalid(typ, f.name, f.v, fmt.Sprintf("within [0, %d] (0 means the default)", maxLimit))
		}
	}
	if minL == 0 {
		minL = defaultMinLimit
	}
	if maxL == 0 {
		maxL = max(defaultMaxLimit, minL)
	}
	if minL > maxL {
		return 0, b, invalid(typ, "MinLimit", minL, fmt.Sprintf("<= MaxLimit (%d)", maxL))
	}
	if initial == 0 {
		initial = min(max(defaultInitialLimit, minL), maxL)
	}
	if initial < minL || initial > maxL {
		return 0, b, invalid(typ, "InitialLimit", initial, fmt.Sprintf("within [MinLimit, MaxLimit] = [%d, %d]", minL, maxL))
	}
	return float64(initial), bounds{float64(minL), float64(maxL)}, nil
}

func (b bounds) clamp(l float64) float64 { return min(max(l, b.min), b.max) }

// smooth moves limit the share s of the way to next and clamps the result.
// next is not clamped first: a limit smoothed toward MaxLimit itself only
// approaches it (99.2, 99.36, ... for 100), admits MaxLimit − 1 all the
// while, and rounding can stop it a few ulps short for good.
func (b bounds) smooth(limit, next, s float64) float64 {
	return b.clamp((1-s)*limit + s*next)
}

// checkNonNegative rejects a negative duration field.
func checkNonNegative(typ, field string, d time.Duration) error {
	if d < 0 {
		return invalid(typ, field, d, ">= 0 (0 means the default)")
	}
	return nil
}

// checkFraction rejects a ratio outside (0, 1]; 0 is left for the default.
func checkFraction(typ, field string, v float64) error {
	if v < 0 || v > 1 || math.IsNaN(v) {
		return invalid(typ, field, v, "within (0, 1] (0 means the default)")
	}
	return nil
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
