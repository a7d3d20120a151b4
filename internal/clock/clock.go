// Package clock gives the monotonic nanosecond readings the limiters'
// decision code works in.
//
// Decision code keeps time as int64 nanoseconds since a process-wide epoch:
// one word, cheap to compare and to store in an atomic. Nanos reads it through
// time.Since, which on the common path reads only the monotonic clock (about
// half the cost of time.Now) and inside a testing/synctest bubble falls back
// to the bubble's fake clock, so waiting code stays testable in virtual time.
package clock

import "time"

var epoch = time.Now()

// Nanos returns the current monotonic time in nanoseconds since the epoch.
func Nanos() int64 { return int64(time.Since(epoch)) }

// FromTime converts t to nanoseconds since the epoch. Times before the epoch
// are negative; that is fine, only differences matter.
func FromTime(t time.Time) int64 { return int64(t.Sub(epoch)) }

// ToTime converts nanoseconds since the epoch back to a time.Time.
func ToTime(n int64) time.Time { return epoch.Add(time.Duration(n)) }
