package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// The response fields the middleware sets, in canonical form.
const (
	headerRetryAfter = "Retry-After"
	headerPolicy     = "Ratelimit-Policy" // canonical form of RateLimit-Policy
	headerRateLimit  = "Ratelimit"        // canonical form of RateLimit
)

// Status returns the response status for a request that was not admitted:
// 429 Too Many Requests when the client is over a rate (ReasonRate,
// ReasonTooLarge, ReasonThrottled), 503 Service Unavailable otherwise: the
// server is at its concurrency limit or overloaded, or the wait ended.
func Status(err error) int {
	switch sluice.ReasonOf(err) {
	case sluice.ReasonRate, sluice.ReasonTooLarge, sluice.ReasonThrottled:
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// Reject is the default Config.OnReject: it writes Status(err) with the
// status text as a plain-text body. The middleware has already set
// Retry-After (and RateLimit, for a rate policy).
func Reject(w http.ResponseWriter, _ *http.Request, err error) {
	code := Status(err)
	http.Error(w, http.StatusText(code), code)
}

// RetryAfterSeconds returns d in the whole seconds of a Retry-After field,
// rounded up, and 0 for d <= 0 (no hint). Rounding down would tell a client
// to come back a fraction of a second before the limiter can admit it, and
// a client that obeys would be rejected again (brandur/redis-cell#56).
func RetryAfterSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// setRejectHeaders sets Retry-After when the limiter gave a hint and, for a
// rate rejection under a declared policy, the RateLimit field: nothing
// remains, more comes after the hint.
func setRejectHeaders(h http.Header, re *sluice.RejectError, policyName string) {
	secs := RetryAfterSeconds(re.RetryAfter)
	if secs == 0 {
		return
	}
	v := strconv.FormatInt(secs, 10)
	h[headerRetryAfter] = []string{v}
	if policyName != "" && re.Reason == sluice.ReasonRate {
		h[headerRateLimit] = []string{policyName + ";r=0;t=" + v}
	}
}
