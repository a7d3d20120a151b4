package client

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter bounds what ParseRetryAfter returns, so that a huge value
// from a server (or a date centuries ahead) cannot overflow a Duration. Any
// retry policy caps its waits far below it.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3) as a
// wait from now: either delay-seconds (digits only) or an HTTP-date. A date
// in the past means retry at once (0, true). A value longer than
// MaxRetryAfter is capped at MaxRetryAfter. An empty or malformed value, a
// negative or fractional number included, returns (0, false): it is ignored.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		// Accumulate with a cap instead of strconv, so that a thousand-digit
		// value is capped rather than rejected as out of range.
		const capSec = int64(MaxRetryAfter / time.Second)
		var sec int64
		for i := 0; i < len(v) && sec <= capSec; i++ {
			sec = sec*10 + int64(v[i]-'0')
		}
		return min(time.Duration(sec)*time.Second, MaxRetryAfter), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return min(d, MaxRetryAfter), true // Sub saturates, so a far date is capped here
	}
	return 0, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
