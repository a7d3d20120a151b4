// Package timescale multiplies durations by a run's time scale (the
// origin's and the load generator's -timescale), refusing a product that
// does not fit in a time.Duration.
package timescale

import (
	"fmt"
	"math"
	"time"
)

// Scale multiplies d by f; ok is false when the product does not fit in a
// time.Duration. Converting a float64 beyond its range to an integer gives
// an arbitrary value (a negative one on amd64): a timeout scaled that way
// was silently disabled, and a change, a step or a burst came at once.
func Scale(d time.Duration, f float64) (_ time.Duration, ok bool) {
	v := float64(d) * f
	// float64(math.MaxInt64) rounds up to 2^63, which does not fit;
	// -2^63 does.
	if !(v >= math.MinInt64 && v < math.MaxInt64) {
		return 0, false
	}
	return time.Duration(v), true
}

// TooLong is the complaint about a duration that time scale f scales past
// what a time.Duration holds.
func TooLong(f float64) string {
	return fmt.Sprintf("times timescale %v must fit in a time.Duration (at most %v)", f, time.Duration(math.MaxInt64))
}
