package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// A client that goes away before its answer (its timeout passed, it
// navigated off) does not stop the upstream: most services finish a
// request whatever became of its connection, and the worker it holds is
// busy until then. If the proxy gave the request's permits back when the
// client left, its limits would count the upstream free while it works,
// admit more, and build the very queue they are there to prevent; an
// adaptive limit would learn only from the requests fast enough to keep
// their clients, and see latency and in flight that are not the
// upstream's. Measured on seed 003 through the proxy (docs/benchmarks.md):
// adaptive.Little's limit fell to 1 and the goodput to half the
// achievable, where the simulator and the middleware, which count the
// work to its end, keep it.
//
// So on a route with a policy and on_client_gone: wait (the default), a
// request whose client left before the upstream's response headers still
// waits for them, at most the route's timeout (boundHeaders); its permits
// are held until then, and the upstream's answer is its outcome (a 5xx or
// a timeout is Dropped, a late success is Dropped by the adaptive
// timeout). Then the upstream request is closed: the body nobody reads is not fetched. A
// client that leaves while the body comes cancels it at once, as before.
// Requests waiting for an upstream with their client gone are counted by
// sluice_proxy_abandoned_requests: the work nobody waits for.
// on_client_gone: cancel closes the upstream request as soon as the
// client leaves and gives the permits back, for an upstream known to stop
// its work when its connection closes.

// countsInFlight reports whether the policy has a concurrency limit, the
// only kind whose count a request's end changes: a route whose policy has
// token buckets only (whose tokens are spent on admission) cancels at once
// whatever on_client_gone says, and pays nothing for waiting.
func (p *policy) countsInFlight() bool {
	return p.conc != nil || p.perKeyConc != nil || p.sharedConc != nil
}

// Route.OnClientGone values.
const (
	ClientGoneWait   = "wait"
	ClientGoneCancel = "cancel"
)

// errClientGone ends a request whose upstream answered after its client
// left: ReverseProxy closes the response and calls upstreamError.
var errClientGone = errors.New("the client went away before the upstream answered")

// waitForUpstream is the handler between a route's limits and its
// ReverseProxy when on_client_gone is wait: it sends the request upstream
// with a context that the client's going away cancels only once the
// response headers have come (upstreamAnswered). Meanwhile the request
// counts in the route's sluice_proxy_abandoned_requests.
type waitForUpstream struct {
	next http.Handler
	rt   *route
}

// The states of a request on such a route.
const (
	upWaiting   = iota // for the upstream's headers
	upAnswered         // the headers came with the client there
	upAbandoned        // the client left first
	upDone             // the handler returned: the client's leaving changes nothing now
)

// errHeaderTimeout cancels the upstream request of a request with a body
// whose headers did not come within the route's timeout, while the proxy
// waited on the upstream (upload.go). A timeout, so the client (if there)
// is answered 504.
var errHeaderTimeout = fmt.Errorf("the upstream did not answer within the route's timeout: %w", context.DeadlineExceeded)

func (h waitForUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := stateFrom(r.Context())
	if st == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	if st.clientGone() {
		return // it left while admitted: nothing to send, nobody to answer
	}
	st.detached.parent = r.Context()
	up, cancel := context.WithCancelCause(&st.detached)
	defer cancel(nil)
	out := r.WithContext(up)
	st.boundHeaders(out, h.rt.spec.Timeout, cancel)
	st.abandoned = h.rt.metrics.abandoned
	stop := context.AfterFunc(st.ctx, func() {
		if st.up.Load() == upWaiting {
			// Counted before the state says abandoned, which is what
			// lets the request's end take it back: never the other way.
			st.abandoned.Inc()
			if st.up.CompareAndSwap(upWaiting, upAbandoned) {
				return
			}
			st.abandoned.Dec()
		}
		cancel(nil) // the body is for nobody now
	})
	defer func() {
		stop() // false when it started already: then upDone fails its CompareAndSwap
		if st.up.Swap(upDone) == upAbandoned {
			st.abandoned.Dec()
		}
		st.stopHeaders()
	}()
	h.next.ServeHTTP(w, out)
}

// detachedCtx is what context.WithoutCancel makes of parent, without its
// allocation, since it lives in the request's state: parent's values, no
// deadline, never done. Unlike WithoutCancel's, its Value does not hide
// the client's cancelCtx from the context package; that only ever looks
// for it behind a non-nil Done, so WithCancelCause and AfterFunc on it
// link nothing to the client, as on WithoutCancel's. The cancellable
// context made on it stays the context package's: the transport reads
// its cause (errHeaderTimeout, a 504) with context.Cause, which finds a
// cause only in a cancelCtx of that package.
type detachedCtx struct{ parent context.Context }

func (c *detachedCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *detachedCtx) Done() <-chan struct{}       { return nil }
func (c *detachedCtx) Err() error                  { return nil }
func (c *detachedCtx) Value(key any) any           { return c.parent.Value(key) }

// boundUpload is the handler in front of a route's ReverseProxy on the
// routes that do not wait (no policy, on_client_gone: cancel, or token
// buckets only): boundHeaders alone.
type boundUpload struct {
	next    http.Handler
	timeout time.Duration
}

func (h boundUpload) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := stateFrom(r.Context())
	if st == nil || r.ContentLength == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	up, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	out := r.WithContext(up)
	st.boundHeaders(out, h.timeout, cancel)
	defer st.stopHeaders()
	h.next.ServeHTTP(w, out)
}

// upstreamAnswered is the ReverseProxy's ModifyResponse: it ends a request
// whose client is gone (errClientGone), its status recorded for the
// outcome. It runs on the request's goroutine.
func upstreamAnswered(res *http.Response) error {
	st := stateFrom(res.Request.Context())
	if st == nil {
		return nil
	}
	st.stopHeaders()         // the body may take longer
	if st.abandoned == nil { // on_client_gone: cancel
		return nil
	}
	if st.up.CompareAndSwap(upWaiting, upAnswered) {
		return nil
	}
	st.goneStatus = res.StatusCode
	return errClientGone
}

// clientGone reports whether the client went away.
func (st *reqState) clientGone() bool { return st.ctx != nil && st.ctx.Err() != nil }
