package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// KeyFunc picks what a per-key limit counts a request against. It returns
// false when the request has no usable key; the middleware then counts the
// request against Config.FallbackKey, so a missing header cannot be used to
// skip the limit.
//
// The key is client input: keep it short (the per-key limiter caps how many
// keys it holds, not how long they are).
type KeyFunc func(r *http.Request) (key string, ok bool)

// MaxKeyLen is the longest key the middleware passes to the per-key
// limiter; a longer one is replaced by a digest. The built-in KeyFuncs treat
// a longer header value or path as no usable key instead.
const MaxKeyLen = 256

// digestKey stands for a key too long to store: a collision-resistant
// digest, so that clients cannot share (or attack) each other's limits by
// sending long keys that only differ past a cut.
func digestKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// HeaderKey keys requests by the value of a header, such as an API key.
// A missing, empty or over-long (more than 256 bytes) value is no usable key.
func HeaderKey(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		v := r.Header[name]
		if len(v) == 0 || v[0] == "" || len(v[0]) > MaxKeyLen {
			return "", false
		}
		return v[0], true
	}
}

// PathKey keys requests by URL path, for a limit per route. Paths are chosen
// by clients: pair it with a per-key limiter that caps its keys, or key by the
// matched mux pattern instead (PatternKey).
func PathKey(r *http.Request) (string, bool) {
	p := r.URL.Path
	if p == "" || len(p) > MaxKeyLen {
		return "", false
	}
	return p, true
}

// PatternKey keys requests by the http.ServeMux pattern that matched them
// ("GET /items/{id}"), a bounded set chosen by the server. It is only set
// when the middleware runs inside the mux (wrapping the handler given to
// Handle), not around it.
func PatternKey(r *http.Request) (string, bool) {
	if r.Pattern == "" {
		return "", false
	}
	return r.Pattern, true
}

// MethodKey keys requests by HTTP method.
func MethodKey(r *http.Request) (string, bool) {
	if r.Method == "" {
		return http.MethodGet, true // the server's reading of an empty method
	}
	if len(r.Method) > MaxKeyLen {
		return "", false
	}
	return r.Method, true
}
