package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// A client may send its timeout with each request (routes[].deadline_header,
// as gRPC's grpc-timeout or Envoy's x-envoy-expected-rq-timeout-ms do):
// the request then has a deadline that far from its arrival, which the
// route's limits see. A wait for admission ends at it, and a concurrency
// limit refuses at once a waiter that could not be served before it (503).
// It does not cut the upstream short on its own: with on_client_gone: wait
// the proxy still waits for the upstream's answer and passes it on to a
// client still there; with cancel the upstream request is closed at the
// deadline and the client answered 504.
//
// A request that outlives the deadline is Dropped, an overload signal, as
// one slower than the adaptive timeout is, but per request, only when its
// TCP peer is one of client_ip.trusted_proxies: the deadline is then the
// word of a proxy the operator trusts. From anyone else it is the client's
// word, and the client's own business: were it an overload signal, any
// client sending a 1 ms timeout could bring down the adaptive limit that
// every client of the route shares. Its expiry then ends its context with
// errClientDeadline, and the outcome is what it would have been without
// the header (outcome, which httplimit asks about a deadline with a cause
// of its own): the upstream's answer, judged against the
// operator's adaptive timeout, with on_client_gone: wait; Ignore with
// cancel, whose upstream request was closed at the deadline: nothing was
// learned about the upstream.

// errClientDeadline is the cause of the end of a request whose deadline an
// untrusted client sent. A timeout, so the client is answered 504.
var errClientDeadline = fmt.Errorf("the deadline the client sent passed: %w", context.DeadlineExceeded)

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

// withClientDeadline returns ctx with the deadline d from st's start. The
// deadline of a peer that is not a trusted proxy is recorded in st, so
// that its expiry is not taken for an overload signal.
func (st *reqState) withClientDeadline(ctx context.Context, d time.Duration, trusted bool) (context.Context, context.CancelFunc) {
	if trusted {
		return context.WithDeadline(ctx, st.start.Add(d))
	}
	ctx, cancel := context.WithDeadlineCause(ctx, st.start.Add(d), errClientDeadline)
	st.clientDeadline = ctx
	return ctx, cancel
}

// clientDeadlinePassed reports whether the request outlived a deadline
// that an untrusted client sent.
func (st *reqState) clientDeadlinePassed() bool {
	return st.clientDeadline != nil && errors.Is(context.Cause(st.clientDeadline), errClientDeadline)
}

// untrustedOutcome is the outcome of a request that outlived the deadline
// an untrusted client sent: what it would have been without the header.
func (st *reqState) untrustedOutcome() sluice.Outcome {
	switch {
	case st.clientGone():
		return st.goneOutcome()
	case st.abandoned == nil:
		// on_client_gone: cancel: the upstream request was closed at
		// the deadline, its answer unknown.
		return sluice.Ignore
	}
	return statusOutcome(st.status) // the upstream's, or the 502 or 504 for its failure
}
