package proxy

import (
	"net/http"
	"strconv"
	"time"
)

// A client may send its timeout with each request (routes[].deadline_header,
// as gRPC's grpc-timeout or Envoy's x-envoy-expected-rq-timeout-ms do):
// the request then has a deadline that far from its arrival, which the
// route's limits see. A wait for admission ends at it, and a concurrency
// limit refuses at once a waiter that could not be served before it (503);
// a request that outlives it is Dropped, an overload signal, as one slower
// than the adaptive timeout is, but per request. It does not cut the
// upstream short on its own: with on_client_gone: wait the proxy still
// waits for the upstream's answer and passes it on to a client still
// there; with cancel the upstream request is closed at the deadline and
// the client answered 504.

// maxClientTimeout bounds a header's value: past it, a duration's
// arithmetic would overflow, and no client waits that long.
const maxClientTimeout = 24 * time.Hour

// clientTimeout reads the timeout a client sent in header name: a Go
// duration ("2.5s", "250ms") or whole milliseconds ("2500"). A missing,
// unreadable or non-positive value is none: the header is the client's
// word, and a bad one must not fail its request.
func clientTimeout(r *http.Request, name string) (time.Duration, bool) {
	if name == "" {
		return 0, false
	}
	v := r.Header.Get(name)
	if v == "" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms > int64(maxClientTimeout/time.Millisecond) {
			return 0, false
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, maxClientTimeout), true
}
