package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// TransportConfig configures a Transport.
type TransportConfig struct {
	// Base sends the requests. Default http.DefaultTransport.
	Base http.RoundTripper
	// Limiter admits every attempt, retries included, before it is sent: a
	// concurrency limit, a Throttler, or sluice.All of several. Its
	// rejection of a request's first attempt is returned as the RoundTrip
	// error (match it with errors.Is(err, sluice.ErrRejected)); a retry it
	// rejects was never sent, so it is given back to the retry budget and
	// the caller gets the answer that called for the retry. Default: none.
	Limiter sluice.Limiter
	// Retry governs retries; see RetryPolicy for its defaults. Set
	// MaxAttempts to 1 to disable them.
	Retry RetryPolicy
}

// TransportStats counts a Transport's work since it was created.
type TransportStats struct {
	RetryStats
	// Rejected counts attempts the Limiter rejected locally (for a
	// Throttler, the locally throttled requests).
	Rejected uint64
}

// Transport is an http.RoundTripper that admits outgoing requests through a
// sluice.Limiter and retries the ones the server turned away.
//
// A response is retried when it is 429 or 503 and the request body can be
// sent again (no body, or a GetBody that does not fail): the server says it
// did not do the work. A transport error (connection refused or reset, a
// timeout) is retried only when the body can be sent again and the request
// is idempotent, since the work may have been done: GET, HEAD, OPTIONS,
// TRACE, PUT or DELETE (RFC 9110's idempotent methods; net/http itself
// replays only the first four), or any request with an Idempotency-Key or
// X-Idempotency-Key header, as in net/http. A transport error that every
// retry would meet again is returned at once, as the base transport returned
// it: a request net/http refuses to send (an unsupported protocol scheme, no
// host, an invalid method or header), a server certificate the client does
// not trust (a *tls.CertificateVerificationError or an x509 error), a server
// that does not speak TLS (a tls.RecordHeaderError). Retries follow the
// RetryPolicy: full-jitter backoff, counted from the server's Retry-After, a
// budget across requests, no wait that would outlast the request's context
// deadline. When the policy says stop, or the request's context is done, the
// last response is returned as it is. It is returned too when the Limiter
// rejects the retry, which was then never sent and costs the budget
// nothing. A response that calls for a retry is kept through the backoff,
// its body unread (its connection held), until the retry is admitted, then
// drained and closed.
//
// The Limiter's permit is held until the response body is closed or read to
// the end (a response returned because its retry was rejected gave its
// permit back before the backoff), and released as Dropped for a 429, a
// 5xx, a transport error or a request whose deadline passed before the
// answer (the overload signals), as Ignore when the request's context was
// cancelled before the answer or the transport error is one no retry can
// cure (see above), and as Success
// otherwise; the latency is the time to the response headers.
//
// Safe for concurrent use.
type Transport struct {
	base    http.RoundTripper
	limiter sluice.Limiter
	retrier *Retrier

	rejected atomic.Uint64
}

// NewTransport returns a Transport, or a *sluice.ConfigError that
// names the bad field.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	r, err := NewRetrier(cfg.Retry)
	if err != nil {
		return nil, err
	}
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	return &Transport{base: cfg.Base, limiter: cfg.Limiter, retrier: r}, nil
}

// Stats returns the counters.
func (t *Transport) Stats() TransportStats {
	return TransportStats{RetryStats: t.retrier.Stats(), Rejected: t.rejected.Load()}
}

// CloseIdleConnections closes the base transport's idle connections, if it
// has a CloseIdleConnections method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	t.retrier.beginAt(clock.Nanos())
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	attemptReq := req
	// A retry takes from the budget when it is decided, before the
	// backoff, and asks the limiter after it, when it goes out: asking the
	// limiter first would hold a concurrency slot idle through the wait or
	// draw on a Throttler's window as it was before it, and charging the
	// budget last would make a request the budget turns down wait out the
	// backoff for nothing. So a retry the limiter rejects is refunded
	// (charged is when it was decided), and the caller gets the answer
	// that called for it, prevResp or prevErr, as if the policy had said
	// stop: that answer's body is left unread until the retry is admitted.
	var (
		prevResp *http.Response
		prevErr  error
		charged  int64
	)
	for attempts := 1; ; attempts++ {
		permit := sluice.Permit{}
		if t.limiter != nil {
			var err error
			if permit, err = t.limiter.Acquire(ctx); err != nil {
				if sluice.ReasonOf(err) != sluice.ReasonUnknown {
					t.rejected.Add(1)
				}
				closeBody(attemptReq) // a RoundTripper must close the body even on error
				if attempts > 1 {
					t.retrier.refundAt(charged) // never sent
					if ctx.Err() == nil {
						return prevResp, prevErr
					}
					discard(prevResp) // the caller left: its error, as after the backoff
				}
				return nil, err
			}
		}
		discard(prevResp) // the retry is admitted: the answer it replaces is not needed
		prevResp = nil
		start := clock.Nanos()
		resp, err := t.send(attemptReq, &permit)
		latency := time.Duration(clock.Nanos() - start)
		if resp == nil && err == nil {
			// A breach of the RoundTripper contract, which net/http's
			// Client makes an error too: reading the status would panic
			// with the permit held for good. It says nothing about the
			// backend (Ignore), and another attempt would fare no better.
			permit.Release(sluice.Ignore, latency)
			return nil, fmt.Errorf("sluice/client: RoundTripper %T returned a nil *Response with a nil error", t.base)
		}
		// Whether no retry can cure the error decides both the outcome
		// and the retry: it is worked out once.
		permanent := err != nil && cannotSucceed(err)
		outcome := outcomeOf(ctx, resp, err, permanent)

		if replayable && t.shouldRetry(req, resp, err, permanent) {
			// The next attempt's body first: when GetBody fails, the
			// request cannot be sent again, and the retries end before
			// one is charged or waited for. The request is copied only
			// once a retry is decided.
			if body, rerr := nextBody(req); rerr == nil {
				hint := time.Duration(0)
				if resp != nil {
					hint, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
				}
				if wait, d, at := t.retrier.nextCtx(ctx, attempts, hint); d == Retry {
					permit.Release(outcome, latency)
					if cerr := t.retrier.wait(ctx, wait, at); cerr != nil {
						closeReader(body)
						discard(resp)
						return nil, cerr
					}
					prevResp, prevErr, charged = resp, err, at
					attemptReq = rewind(req, body)
					continue
				}
				closeReader(body)
			}
		}
		if err != nil {
			permit.Release(outcome, latency)
			return nil, err
		}
		return releaseOnClose(ctx, resp, permit, outcome, latency), nil
	}
}

// send is the base RoundTrip with the permit given back if it panics: a
// server recovers a handler's panic and carries on, and a permit lost there
// would be a concurrency slot lost for the life of the limiter.
func (t *Transport) send(req *http.Request, permit *sluice.Permit) (*http.Response, error) {
	returned := false
	defer func() {
		if !returned {
			permit.Release(sluice.Dropped, 0)
		}
	}()
	resp, err := t.base.RoundTrip(req)
	returned = true
	return resp, err
}

// shouldRetry reports whether the answer to req calls for another attempt;
// permanent is cannotSucceed(err), worked out by the caller.
func (t *Transport) shouldRetry(req *http.Request, resp *http.Response, err error, permanent bool) bool {
	if req.Context().Err() != nil {
		// The caller has left and no retry will be sent: asking the
		// retrier would take one from the shared budget and count it.
		return false
	}
	if err != nil {
		return idempotent(req) && !permanent
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// outcomeOf is the permit's outcome for an attempt's answer; permanent is
// cannotSucceed(err), worked out by the caller.
func outcomeOf(ctx context.Context, resp *http.Response, err error, permanent bool) sluice.Outcome {
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return sluice.Ignore // the caller left: the failure says nothing about the server
	case err != nil && permanent:
		return sluice.Ignore // a bad request or TLS setup, not a server short of capacity
	case err != nil:
		// A failure, or a timeout: the backend did not answer in the time
		// the caller gave it, the overload signal a Throttler must not
		// count as an accept (Ignore is one, for no overload signal).
		return sluice.Dropped
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return sluice.Dropped
	}
	return sluice.Success
}

// cannotSucceed reports whether a transport error would come back the same
// on every retry: net/http refused to send the request (an unsupported
// protocol scheme, no host, an invalid method or header), the client does
// not trust the server's TLS certificate, or the server does not speak TLS.
// Retrying those only spends the budget and delays the caller's error.
func cannotSucceed(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		cert     x509.CertificateInvalidError
		record   tls.RecordHeaderError // https:// to a server that answers in plain HTTP
	)
	if errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &cert) || errors.As(err, &record) || errors.Is(err, http.ErrSchemeMismatch) {
		return true
	}
	// net/http's checks of the request (Transport.roundTrip) return
	// untyped errors: they are known by their text. Only the innermost
	// error's text is read, and only its start: a wrapper's text, such as
	// a *url.Error's, carries the URL, which may contain any of these
	// phrases.
	msg := innermost(err).Error()
	for _, s := range invalidRequest {
		if strings.HasPrefix(msg, s) {
			return true
		}
	}
	return false
}

// innermost follows err's chain of single wrapped errors to its end. An
// error that wraps several (Unwrap() []error) ends the walk.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// invalidRequest holds the start of each message net/http's
// Transport.roundTrip gives a request it refuses to send.
var invalidRequest = [...]string{
	"unsupported protocol scheme",
	"http: no Host in request URL",
	"http: nil Request.URL",
	"http: nil Request.Header",
	"net/http: invalid header ",
	"net/http: invalid trailer ",
	"net/http: invalid method ",
}

// idempotent is RFC 9110's rule (section 9.2.2) plus net/http's
// Idempotency-Key convention. It is wider than net/http's own rule for
// replaying a request on a new connection, which leaves out PUT and DELETE.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// nextBody returns a fresh copy of req's body for another attempt, or nil
// when req has no body.
func nextBody(req *http.Request) (io.ReadCloser, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	return req.GetBody()
}

// rewind returns a copy of req for another attempt, with body, from
// nextBody, in place of req's body when req has one.
func rewind(req *http.Request, body io.ReadCloser) *http.Request {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		r.Body = body
	}
	return r
}

// closeReader closes body, a nextBody that will not be sent.
func closeReader(body io.ReadCloser) {
	if body != nil {
		body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// discard drains resp's body, if there is a resp.
func discard(resp *http.Response) {
	if resp != nil {
		drain(resp.Body)
	}
}

// drain reads a little of a body we discard so that its connection can be
// reused, then closes it. A long body is cheaper to drop with its connection.
func drain(body io.ReadCloser) {
	if body == nil {
		return // a RoundTripper may answer without one (net/http allows it)
	}
	io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}

// releaseOnClose returns resp with its body wrapped so that the permit is
// released when the body is closed or read to its end: the exchange holds
// its concurrency slot until then.
func releaseOnClose(ctx context.Context, resp *http.Response, p sluice.Permit, o sluice.Outcome, latency time.Duration) *http.Response {
	if !p.Held() {
		return resp
	}
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		p.Release(o, latency) // nothing to wait for, or a body we must not wrap (an upgraded connection is an io.ReadWriteCloser)
		return resp
	}
	resp.Body = &permitBody{ReadCloser: resp.Body, ctx: ctx, p: p, o: o, latency: latency}
	return resp
}

type permitBody struct {
	io.ReadCloser
	ctx      context.Context
	p        sluice.Permit
	o        sluice.Outcome
	latency  time.Duration
	released atomic.Bool // Read and Close may race: net/http allows Close to abort a Read
}

func (b *permitBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		o := b.o
		switch {
		case errors.Is(err, io.EOF):
		case b.ctx.Err() != nil:
			o = sluice.Ignore // the caller left
		default:
			o = sluice.Dropped // the body broke off: a reset or a timeout
		}
		b.release(o)
	}
	return n, err
}

func (b *permitBody) Close() error {
	err := b.ReadCloser.Close()
	b.release(b.o)
	return err
}

func (b *permitBody) release(o sluice.Outcome) {
	if b.released.CompareAndSwap(false, true) {
		b.p.Release(o, b.latency)
	}
}
