package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Keyed holds one limiter per key, made on first use, with a cap on the
// number of keys. *keyed.Buckets and *keyed.Map satisfy it.
type Keyed interface {
	Acquire(ctx context.Context, key string) (sluice.Permit, error)
	TryAcquire(key string) (sluice.Permit, error)
}

// defaultFallbackKey is the key of requests whose KeyFunc found no usable
// key, when Config.FallbackKey is empty. It is not an IP address, so it
// cannot collide with a client-IP key.
const defaultFallbackKey = "unknown"

// Config configures the middleware. At least one of Limiter and PerKey is
// required; every other field has a working default.
type Config struct {
	// Limiter is the limit every request passes: a rate or concurrency
	// limiter, or a composition of several (sluice.All). It is asked after
	// PerKey, so a client over its own limit never takes a global slot.
	// nil: no global limit.
	//
	// The middleware calls Acquire with the request's context, its
	// deadline brought to MaxWait if that is sooner; a limiter's own wait
	// bound (a queue's MaxWait, a bucket's MaxWait) may cut the wait
	// shorter. A limiter may derive contexts from it (context.WithTimeout):
	// it stays valid after Acquire returns.
	Limiter sluice.Limiter

	// PerKey holds a limiter per key. nil: no per-key limit. Keys are
	// client input: use a *keyed.Buckets or a *keyed.Map, whose MaxKeys
	// caps how many they hold (the middleware caps how long each is, see
	// Key).
	PerKey Keyed

	// Key picks the key of a request for PerKey. nil: the client IP address
	// (see ClientIP). A key longer than MaxKeyLen bytes is replaced by its
	// SHA-256 digest, so no key costs more memory than that.
	Key KeyFunc

	// FallbackKey is the key of a request for which Key found no usable
	// key; such requests share one limiter and are counted in
	// Stats.FallbackKeys. Default "unknown".
	FallbackKey string

	// ClientIP configures the default Key: the TCP peer's address, or with
	// trusted proxies, the first untrusted address in their forwarding
	// header. Default: the TCP peer; no header is ever trusted. Setting it
	// along with a custom Key is an error: build the IP key with
	// NewClientIP and call it from your Key.
	ClientIP IPConfig

	// Policy describes the rate limit to clients in the RateLimit-Policy
	// and RateLimit response fields (draft-ietf-httpapi-ratelimit-headers).
	// nil: those fields are not sent. Retry-After is sent regardless.
	Policy *RatePolicy

	// OnReject writes the response to a request that was not admitted: a
	// rejection (err is a *Rejection wrapping the limiter's
	// *sluice.RejectError) or a wait cut short by the request's context
	// (err is the context's error). Retry-After and RateLimit are already
	// set when it is called. nil: WriteRejection, which sends Status(err) with a
	// short plain-text body.
	OnReject func(w http.ResponseWriter, r *http.Request, err error)

	// NoWait asks the limiters with TryAcquire: a request is admitted or
	// rejected at once, never queued, whatever the limiters' own wait
	// settings. Default false: Acquire, with a wait bounded by MaxWait,
	// MaxWaiting and MaxWaitingPerKey.
	NoWait bool

	// MaxWait bounds a request's wait for admission (per-key and global
	// limiter together). The limiters see a context whose deadline is
	// MaxWait away (or the request's own, if sooner): deadline-aware
	// limiters (token buckets, concurrency limits) reject at once, with
	// sluice.ReasonDeadline, a request they could not admit in time, and a
	// wait that runs out is rejected with sluice.ReasonQueueTimeout.
	// Default 1s; must not be negative.
	MaxWait time.Duration

	// MaxWaiting caps the requests waiting for admission at once; one
	// more is rejected at once with sluice.ReasonQueueFull (503). Default
	// 1024; must not be negative.
	MaxWaiting int

	// MaxWaitingPerKey caps the requests of one key waiting for admission
	// at once (with PerKey); one more is rejected at once with
	// sluice.ReasonQueueFull as a per-key rejection (429). Keys share 4,096
	// counters by hash, so two keys may share a cap: stricter, never
	// looser, and a fixed 16 KiB whatever the keys. Default 8; must not be
	// negative.
	MaxWaitingPerKey int

	// DryRun admits every request, counting those that would have been
	// rejected in Stats.WouldReject (once, by the first limiter that said
	// no), and those a limiter failed to decide (a keyed.Map whose New
	// failed) in Stats.Errors. In dry run the middleware never waits: it
	// uses TryAcquire, so a request that a limiter would have queued
	// counts as a would-be rejection. Every request still holds the permits it was granted
	// (the global one too when the per-key limit said no), so concurrency
	// and adaptive limits see the real load.
	DryRun bool

	// Outcome tells the limiters how the handler's work ended, from the
	// response status (200 when the handler wrote nothing). It is not
	// called when the request's context ended first (deadline exceeded:
	// Dropped, an overload signal; cancelled, the client left: Ignore) nor
	// when the handler panicked or hijacked the connection (Ignore). A
	// deadline that ended with a cause of its own
	// (context.WithDeadlineCause), such as a timeout a client sent from
	// a peer that is not a trusted proxy, is no overload signal: Outcome
	// judges the answer as it would without the deadline (it may read
	// context.Cause).
	// nil: 5xx is Dropped, anything else Success. A value other than
	// Success, Dropped or Ignore is taken as Ignore.
	Outcome func(r *http.Request, status int) sluice.Outcome
}

// RatePolicy describes a rate limit in the IETF RateLimit fields:
//
//	RateLimit-Policy: "name";q=Quota;w=Window
//	RateLimit: "name";r=remaining;t=reset
//
// For a token bucket of rate R per second and burst B, Quota B and Window
// B/R seconds (rounded up) describe it: a client that has been idle for a
// window may send B requests at once.
type RatePolicy struct {
	// Name identifies the policy in both fields. Default "default".
	Name string
	// Quota is the number of requests the policy allows per Window.
	// Required (> 0).
	Quota int
	// Window is the policy's time window, whole seconds of at least 1
	// (the field has no sub-second precision). Required.
	Window time.Duration
	// Remaining, if set, reports what is left of the quota of key (""
	// without PerKey) once a request was admitted, for the RateLimit field
	// of admitted responses: remaining is "r", reset (rounded up to whole
	// seconds) is "t", the time until the quota is whole again; a negative
	// reset (never) leaves "t" out. BucketRemaining builds it for token
	// buckets; a *keyed.Buckets' Remaining method is one. nil: RateLimit is sent only with 429 responses (r=0).
	Remaining func(key string) (remaining int, reset time.Duration)
}

// ValidPolicyName reports whether name can be a RatePolicy.Name: printable
// ASCII (spaces included) without quotes or backslashes. The name goes
// into the RateLimit fields as a quoted sf-string, which holds printable
// ASCII; the two characters that would need escaping are refused, to keep
// it simple. "" is valid: RatePolicy.Name's default then applies.
func ValidPolicyName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// compile validates p and returns the RateLimit-Policy field value and
// the quoted name.
func (p *RatePolicy) compile() (policy, name string, err error) {
	n := p.Name
	if n == "" {
		n = "default"
	}
	if !ValidPolicyName(n) {
		return "", "", configErr("Config.Policy.Name", strconv.Quote(p.Name), "must be printable ASCII without quotes or backslashes")
	}
	if p.Quota <= 0 {
		return "", "", configErr("Config.Policy.Quota", p.Quota, "must be > 0")
	}
	if p.Window < time.Second || p.Window%time.Second != 0 {
		return "", "", configErr("Config.Policy.Window", p.Window, "must be whole seconds, at least 1s")
	}
	name = `"` + n + `"`
	return fmt.Sprintf("%s;q=%d;w=%d", name, p.Quota, p.Window/time.Second), name, nil
}

func (c *Config) ipSet() bool {
	return len(c.ClientIP.TrustedProxies) > 0 || c.ClientIP.ProxyHeader != "" || c.ClientIP.IPv6Prefix != 0
}

func (c *Config) keyFunc() (KeyFunc, error) {
	if c.Key != nil {
		if c.ipSet() {
			return nil, configErr("Config.ClientIP", nil, "must not be set along with a custom Key, which would ignore it: build the IP key with NewClientIP and call it from Key")
		}
		return c.Key, nil
	}
	ip, err := newClientIP(c.ClientIP, "Config.ClientIP.")
	if err != nil {
		return nil, err
	}
	return ip.Key, nil
}

func (c *Config) fallbackKey() (string, error) {
	switch {
	case c.FallbackKey == "":
		return defaultFallbackKey, nil
	case strings.TrimSpace(c.FallbackKey) == "":
		return "", configErr("Config.FallbackKey", strconv.Quote(c.FallbackKey), "must not be blank")
	}
	return c.FallbackKey, nil
}
