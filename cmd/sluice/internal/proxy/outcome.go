package proxy

import (
	"bufio"
	"context"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// How a proxied request's outcome is told to the limiters:
//
//   - an upstream answer of 5xx (502 when the upstream could not be reached,
//     504 when its headers did not come within the route's timeout) is
//     Dropped: the upstream is overloaded or failing;
//   - a request whose client did not send its body in time (408), or broke
//     it off, is Ignore: the client was the slow party (upload.go);
//   - a client that went away before the answer: with on_client_gone:
//     wait (the default), the upstream's answer, which the proxy waits for
//     (gone.go); with cancel, Ignore (httplimit sees the request's context
//     end): it says nothing about the upstream. Either way, with an
//     adaptive limit that has a timeout, a client that left after waiting
//     longer than that timeout is Dropped: it gave up on an answer too
//     slow for it (the seed 003 client times out at 2.5 s), and an
//     algorithm that never heard of those would never back off;
//   - any other answer is Success, with the time to the end of the body;
//   - a long-lived request is Ignore, and gives its permits back as soon as
//     it is known to be long-lived, so that it neither holds a concurrency
//     slot for its whole life nor teaches the adaptive algorithm that the
//     upstream is slow. Long-lived is: a protocol upgrade (WebSocket; the
//     connection is hijacked), a server-sent event stream (Content-Type
//     text/event-stream, known at the response headers), or a body still
//     being written stream_after (default 10 s) after the request came in.
//
// A long poll that answers after a long silence is not told apart from a
// slow upstream (nothing is written until it answers): give such paths a
// route of their own without an adaptive limit.

// reqState is one request's bookkeeping: its response writer and the
// permits it holds, so that they can be given back early; it is also the
// request's context (stateCtx) and the upstream's parent (detached). One
// allocation per request.
type reqState struct {
	w           http.ResponseWriter
	start       time.Time
	streamAfter time.Duration
	dropAfter   time.Duration   // a client that left after this long: Dropped (0: never)
	ctx         context.Context // the request's, to tell a departed client
	status      int
	bytes       int64
	// writeFailed: a write to the client failed, so the client went away
	// (its context may not say so yet when the copy aborts; see record).
	writeFailed bool

	// The request's context with the deadline an untrusted client sent
	// (deadline.go), whose expiry is no overload signal; nil: none.
	clientDeadline context.Context

	// On a route whose on_client_gone is wait (gone.go; abandoned is nil
	// otherwise): where the request is (upWaiting...), its route's gauge
	// of abandoned requests, and the upstream's answer to a client that
	// had gone (its status, or 502 or 504 when it did not answer; 0:
	// none), set and read on the request's goroutine, as is clientFault.
	up         atomic.Int32
	abandoned  prometheus.Gauge
	goneStatus int
	detached   detachedCtx // the upstream context's parent (gone.go)

	// The body of a request with one, watched, with the bound on the
	// wait for the headers (upload.go); nil: none. clientFault: the
	// client's upload failed (too slow, broken off), which says nothing
	// about the upstream: outcome Ignore.
	upload      *upload
	clientFault bool

	mu      sync.Mutex
	long    atomic.Bool      // long-lived: outcome Ignore; set under mu
	permits []sluice.Permit  // held through detaching limiters; zero once released
	buf     [3]sluice.Permit // enough for a global permit and a per-key pair
}

type stateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

// stateCtx is a request's state seen as its context: the client's
// context (ctx) with the state as its stateKey value. It is what
// context.WithValue makes, without the allocation, and without a field:
// the state is allocated anyway. Children of it are tied to the client's
// context as they are to a WithValue's: the context package finds the
// client's cancelCtx through Value.
type stateCtx reqState

func (c *stateCtx) Deadline() (time.Time, bool) { return c.ctx.Deadline() }
func (c *stateCtx) Done() <-chan struct{}       { return c.ctx.Done() }
func (c *stateCtx) Err() error                  { return c.ctx.Err() }

func (c *stateCtx) Value(key any) any {
	if key == (stateKey{}) {
		return (*reqState)(c)
	}
	return c.ctx.Value(key)
}

// withState returns the client's context with st as its value.
func (st *reqState) withState() context.Context { return (*stateCtx)(st) }

// hold records p and returns the permit the caller holds instead.
func (st *reqState) hold(p sluice.Permit) sluice.Permit {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.permits == nil {
		st.permits = st.buf[:0]
	}
	st.permits = append(st.permits, p)
	return sluice.NewPermit(st, uint64(len(st.permits)-1))
}

// holdPair records a and b, to be released and cancelled together (b
// first), and returns the permit the caller holds instead.
func (st *reqState) holdPair(a, b sluice.Permit) sluice.Permit {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.permits == nil {
		st.permits = st.buf[:0]
	}
	st.permits = append(st.permits, a, b)
	return sluice.NewPermit(st, uint64(len(st.permits)-2)|pairToken)
}

// pairToken marks the token of a pair: the first permit's index, with
// the second's after it.
const pairToken = 1 << 32

// Release implements sluice.Releaser for the permits hold and holdPair
// returned.
func (st *reqState) Release(token uint64, o sluice.Outcome, latency time.Duration) {
	st.mu.Lock()
	p, second := st.take(token)
	switch {
	case st.long.Load(), st.clientFault:
		// clientFault: even a client that left after the adaptive
		// timeout (goneOutcome) was not waiting on the upstream.
		o = sluice.Ignore
	case o == sluice.Ignore && st.clientGone():
		o = st.goneOutcome()
	}
	st.mu.Unlock()
	second.Release(o, latency)
	p.Release(o, latency)
}

// goneOutcome is the outcome of a request whose client went away: the
// upstream's answer when it came (on_client_gone: wait), and Dropped when
// the request outlived the adaptive timeout. That is timed from the
// request's arrival, as its client timed it (a wait for admission
// included), not from its admission: a client that gave up at its
// deadline is a failure however long it queued, as in the simulator and
// the middleware, which see the deadline itself.
func (st *reqState) goneOutcome() sluice.Outcome {
	o := sluice.Ignore
	switch {
	case st.goneStatus >= 500:
		o = sluice.Dropped
	case st.goneStatus != 0:
		o = sluice.Success
	}
	if st.dropAfter > 0 && time.Since(st.start) >= st.dropAfter {
		o = sluice.Dropped
	}
	return o
}

// Cancel implements sluice.Releaser.
func (st *reqState) Cancel(token uint64) {
	st.mu.Lock()
	p, second := st.take(token)
	st.mu.Unlock()
	second.Cancel()
	p.Cancel()
}

// take removes the permit of token, and the second of a pair's; st.mu is
// held.
func (st *reqState) take(token uint64) (p, second sluice.Permit) {
	i := token &^ pairToken
	if token&pairToken != 0 {
		second = st.takeAt(i + 1)
	}
	return st.takeAt(i), second
}

func (st *reqState) takeAt(i uint64) sluice.Permit {
	if i >= uint64(len(st.permits)) {
		return sluice.Permit{}
	}
	p := st.permits[i]
	st.permits[i] = sluice.Permit{}
	return p
}

// becomeLong marks the request long-lived and gives back its permits now.
func (st *reqState) becomeLong() {
	st.mu.Lock()
	if st.long.Load() {
		st.mu.Unlock()
		return
	}
	st.long.Store(true)
	held := st.buf // as many as a request holds: a global permit, a per-key pair
	n := copy(held[:], st.permits)
	for i := range st.permits {
		st.permits[i] = sluice.Permit{}
	}
	st.mu.Unlock()
	lat := time.Since(st.start)
	for _, p := range held[:n] {
		p.Release(sluice.Ignore, lat)
	}
}

func (st *reqState) isLong() bool { return st.long.Load() }

// outcome is httplimit's Config.Outcome.
func outcome(r *http.Request, status int) sluice.Outcome {
	st := stateFrom(r.Context())
	switch {
	case st == nil:
	case st.isLong() || st.clientFault:
		return sluice.Ignore
	case st.clientDeadlinePassed():
		// httplimit asks about a deadline that ended with its own cause
		// (an untrusted client's; with on_client_gone: cancel, the 504
		// is the proxy's): what the request would be without it.
		return st.untrustedOutcome()
	}
	return statusOutcome(status)
}

// statusOutcome is the outcome of an answer with status (0: none written,
// which net/http sends as 200).
func statusOutcome(status int) sluice.Outcome {
	if status >= 500 {
		return sluice.Dropped
	}
	return sluice.Success
}

// detaching wraps a limiter so that the permits it grants a request are
// recorded in the request's state (found in the context Acquire gets), to
// be given back early if the request turns out long-lived. TryAcquire has
// no context: its permits (dry run) are held to the end, with outcome
// Ignore for a long-lived request all the same (see outcome).
type detaching struct{ sluice.Limiter }

func (d detaching) Acquire(ctx context.Context) (sluice.Permit, error) {
	p, err := d.Limiter.Acquire(ctx)
	if err != nil {
		return p, err
	}
	if st := stateFrom(ctx); st != nil {
		return st.hold(p), nil
	}
	return p, nil
}

type keyedLimiter interface {
	Acquire(ctx context.Context, key string) (sluice.Permit, error)
	TryAcquire(key string) (sluice.Permit, error)
}

type detachingKeyed struct{ keyedLimiter }

func (d detachingKeyed) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	p, err := d.keyedLimiter.Acquire(ctx, key)
	if err != nil {
		return p, err
	}
	if st := stateFrom(ctx); st != nil {
		return st.hold(p), nil
	}
	return p, nil
}

// The response writer: the status and size for the metrics and the access
// log, and the signs of a long-lived request.

func (st *reqState) Header() http.Header { return st.w.Header() }

const eventStream = "text/event-stream"

func (st *reqState) WriteHeader(code int) {
	if st.status == 0 && code >= 200 {
		st.status = code
		// The prefix test first: parsing every response's type would cost
		// two allocations a request.
		if ct := st.w.Header().Get("Content-Type"); len(ct) >= len(eventStream) && strings.EqualFold(ct[:len(eventStream)], eventStream) {
			if mt, _, _ := mime.ParseMediaType(ct); mt == eventStream {
				st.becomeLong()
			}
		}
	}
	if code == http.StatusSwitchingProtocols {
		st.becomeLong()
	}
	st.w.WriteHeader(code)
}

func (st *reqState) Write(b []byte) (int, error) {
	if st.status == 0 {
		st.WriteHeader(http.StatusOK)
	}
	st.checkLong()
	n, err := st.w.Write(b)
	st.bytes += int64(n)
	if err != nil {
		st.writeFailed = true
	}
	return n, err
}

func (st *reqState) checkLong() {
	if !st.long.Load() && time.Since(st.start) > st.streamAfter {
		st.becomeLong()
	}
}

// Flush is for ReverseProxy's FlushInterval (http.ResponseController).
func (st *reqState) Flush() {
	if st.status == 0 {
		st.WriteHeader(http.StatusOK)
	}
	st.checkLong()
	_ = http.NewResponseController(st.w).Flush()
}

// Hijack is for protocol upgrades: ReverseProxy hijacks the client's
// connection after the upstream's 101 answer.
func (st *reqState) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	st.becomeLong()
	return http.NewResponseController(st.w).Hijack()
}

// Unwrap is for http.ResponseController's other methods.
func (st *reqState) Unwrap() http.ResponseWriter { return st.w }
