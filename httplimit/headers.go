package httplimit

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rate"
)

// The response fields the middleware sets, in canonical form.
const (
	headerRetryAfter = "Retry-After"
	headerPolicy     = "Ratelimit-Policy" // canonical form of RateLimit-Policy
	headerRateLimit  = "Ratelimit"        // canonical form of RateLimit
)

// Rejection is the error Config.OnReject receives for a rejected request.
// It wraps the limiter's *sluice.RejectError, so errors.Is and errors.As see
// the reason and sluice.RetryAfter the hint.
type Rejection struct {
	// Err is the limiter's rejection.
	Err error
	// PerKey is true when the per-key limiter rejected the request (the
	// client is over its own share), false for the global Limiter.
	PerKey bool
	// Key is the request's key; empty when PerKey is not configured.
	Key string
}

func (e *Rejection) Error() string { return e.Err.Error() }
func (e *Rejection) Unwrap() error { return e.Err }

// Status returns the response status for a request that was not admitted.
//
// 429 Too Many Requests says the client is over its quota: any rejection by
// the per-key limiter, and a rate limit's rejection by the global one
// (errors.Is(err, sluice.ErrQuota), whatever its reason: a token bucket
// whose wait would pass the deadline too; or ReasonRate, ReasonTooLarge,
// ReasonThrottled from limiters that do not set RejectError.Quota).
// 503 Service Unavailable says the server is at capacity: the global
// limiter's other rejections (concurrency limit, queue full, queue wait,
// deadline, shed), a wait that ended with the request's context, and a
// shared store that did not answer (ReasonStore), whichever limiter said
// so: the client did nothing wrong.
func Status(err error) int {
	if sluice.ReasonOf(err) == sluice.ReasonStore {
		return http.StatusServiceUnavailable
	}
	var rj *Rejection
	if errors.As(err, &rj) && rj.PerKey && errors.Is(err, sluice.ErrRejected) {
		return http.StatusTooManyRequests
	}
	if errors.Is(err, sluice.ErrQuota) {
		return http.StatusTooManyRequests
	}
	switch sluice.ReasonOf(err) {
	case sluice.ReasonRate, sluice.ReasonTooLarge, sluice.ReasonThrottled:
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// WriteRejection is the default Config.OnReject: it writes Status(err) with
// the status text as a plain-text body. The middleware has already set
// Retry-After (and RateLimit, for a rate policy).
func WriteRejection(w http.ResponseWriter, _ *http.Request, err error) {
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
// 429 under a declared policy, the RateLimit field: nothing remains, and
// with a hint, more comes after it.
func setRejectHeaders(h http.Header, retryAfter time.Duration, status int, policyName string) {
	secs := RetryAfterSeconds(retryAfter)
	if secs > 0 {
		h[headerRetryAfter] = []string{strconv.FormatInt(secs, 10)}
	} else {
		retryAfter = -1 // no hint: RateLimit without "t"
	}
	if policyName != "" && status == http.StatusTooManyRequests {
		h[headerRateLimit] = []string{rateLimitField(policyName, 0, retryAfter)}
	}
}

// BucketRemaining returns a RatePolicy.Remaining for token buckets: get
// returns the bucket of a key (pass a *keyed.Map's Get, or a func returning
// the one global bucket). For a *keyed.Buckets, pass its Remaining method
// itself. The quota left is the bucket's own rate.Bucket.Remaining: the
// whole tokens in the bucket, and the time until it is full again, at its
// rate. A key whose bucket get cannot give has none left, and no reset.
func BucketRemaining(get func(key string) (*rate.Bucket, error)) func(key string) (int, time.Duration) {
	return func(key string) (int, time.Duration) {
		b, err := get(key)
		if err != nil || b == nil {
			return 0, -1
		}
		return b.Remaining()
	}
}

// rateLimitField formats a RateLimit field; a negative reset leaves "t"
// out.
func rateLimitField(name string, remaining int, reset time.Duration) string {
	var buf [64]byte // on the stack for any sane policy name
	b := append(buf[:0], name...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(remaining, 0)), 10)
	if reset >= 0 {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, RetryAfterSeconds(reset), 10)
	}
	return string(b)
}
