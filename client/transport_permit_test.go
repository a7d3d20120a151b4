package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"go.uber.org/goleak"
)

// The Transport's side of the contract: every attempt's permit is released
// once, with the outcome the response implies.

func TestTransportReleasesPermits(t *testing.T) {
	srv := newScript(t, reply{status: 503, retryAfter: "0"})
	synctest.Test(t, func(t *testing.T) {
		th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 1 }}) // never rejects
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase(), Limiter: th})
		resp, err := get(t, tr, t.Context(), srv.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if s := th.Stats(); s.InFlight != 1 || s.Admitted != 2 {
			t.Fatalf("before Close: throttler stats %+v, want 2 admitted and 1 held by the open body", s)
		}
		io.Copy(io.Discard, resp.Body) // reading to EOF releases
		if s := th.Stats(); s.InFlight != 0 {
			t.Fatalf("after EOF: %d in flight, want 0", s.InFlight)
		}
		resp.Body.Close() // and a second release does nothing
		if s := th.Stats(); s.InFlight != 0 {
			t.Fatalf("after Close: %d in flight", s.InFlight)
		}
		// Three more requests that fail make the window 5 requests. With
		// the 503 dropped and the 200 accepted, P = (5 − 2·1)/6 = 1/2; a
		// 503 wrongly counted as accepted gives 1/6, a lost accept 5/6.
		for range 3 {
			p, _ := th.TryAcquire()
			p.Release(sluice.Dropped, 0)
		}
		if p := th.RejectProbabilityAt(time.Now()); p != 0.5 {
			t.Fatalf("P = %v, want 0.5", p)
		}
	})
}

func TestTransportOutcomes(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	late, cancelLate := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancelLate()
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	boom := errors.New("connection reset")
	tests := []struct {
		name string
		ctx  context.Context
		resp *http.Response
		err  error
		want sluice.Outcome
	}{
		{"200", ctx, resp(200), nil, sluice.Success},
		{"404 is the backend answering", ctx, resp(404), nil, sluice.Success},
		{"429", ctx, resp(429), nil, sluice.Dropped},
		{"500", ctx, resp(500), nil, sluice.Dropped},
		{"503", ctx, resp(503), nil, sluice.Dropped},
		{"transport error", ctx, nil, boom, sluice.Dropped},
		{"untrusted certificate", ctx, nil, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, sluice.Ignore},
		{"unsupported protocol scheme", ctx, nil, errors.New(`unsupported protocol scheme "ftp"`), sluice.Ignore},
		{"caller gone", done, nil, context.Canceled, sluice.Ignore},
		{"deadline passed", late, nil, context.DeadlineExceeded, sluice.Dropped},
		{"deadline passed after the answer", late, resp(200), nil, sluice.Success},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.ctx, tt.resp, tt.err, tt.err != nil && cannotSucceed(tt.err)); got != tt.want {
			t.Errorf("%s: outcome %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTransportLimiterRejects(t *testing.T) {
	srv := newScript(t)
	synctest.Test(t, func(t *testing.T) {
		th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }})
		p, _ := th.TryAcquire()
		p.Release(sluice.Dropped, 0) // one failure: P = 1/2, and the draw of 0 rejects
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase(), Limiter: th})
		body := &closeRecorder{Reader: strings.NewReader("x")}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.srv.URL, body)
		_, err := tr.RoundTrip(req)
		if !errors.Is(err, sluice.ErrThrottled) {
			t.Fatalf("err = %v, want ErrThrottled", err)
		}
		if !body.closed {
			t.Fatal("request body not closed: a RoundTripper must close it even on error")
		}
		if n := len(srv.hits()); n != 0 || tr.Stats().Rejected != 1 {
			t.Fatalf("server saw %d requests, stats %+v; want none sent and 1 rejected", n, tr.Stats())
		}
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestTransportConcurrent runs many requests at once over pooled keep-alive
// connections (outside a bubble) so the race detector sees the permit and
// counter paths under contention; the server's count must match the
// transport's.
func TestTransportConcurrent(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%3 == 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0.999999 }})
	tr, _ := NewTransport(TransportConfig{Base: base, Limiter: th, Retry: RetryPolicy{BaseDelay: time.Microsecond}})
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 503 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	st := tr.Stats()
	if st.Requests != 200 || uint64(hits.Load()) != st.Requests+st.Retries {
		t.Fatalf("stats %+v, server saw %d", st, hits.Load())
	}
	if s := th.Stats(); s.InFlight != 0 || s.Admitted != uint64(hits.Load()) {
		t.Fatalf("throttler %+v, want every permit released and one per attempt", s)
	}
}

// panicky is a base transport whose RoundTrip panics, as a buggy one might.
type panicky struct{}

func (panicky) RoundTrip(*http.Request) (*http.Response, error) { panic("boom") }

// A panic in the base transport must not keep the permit: net/http recovers
// a handler's panic and serves on, so a lost permit would be a slot lost for
// good. Fails without the release in Transport.send.
func TestTransportReleasesPermitOnPanic(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := NewTransport(TransportConfig{Base: panicky{}, Limiter: lim})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the base transport's panic", r)
			}
		}()
		get(t, tr, context.Background(), "http://example.invalid/")
	}()
	if s := lim.Stats(); s.InFlight != 0 {
		t.Fatalf("%d permits in flight after the panic, want 0", s.InFlight)
	}
}

// nothing is a base transport that breaks the RoundTripper contract: no
// response and no error.
type nothing struct{}

func (nothing) RoundTrip(*http.Request) (*http.Response, error) { return nil, nil }

// A base transport that returns neither a response nor an error gets an
// error, as from net/http's Client, and its permit back. Reading the
// missing response's status panicked, and the permit was never released.
func TestTransportNilResponseIsAnError(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := NewTransport(TransportConfig{Base: nothing{}, Limiter: lim})
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("RoundTrip panicked: %v", r)
			}
		}()
		resp, err := get(t, tr, context.Background(), "http://example.invalid/")
		if resp != nil || err == nil || !strings.Contains(err.Error(), "nil *Response with a nil error") {
			t.Errorf("RoundTrip = %v, %v; want an error naming the breach", resp, err)
		}
	}()
	if s := lim.Stats(); s.InFlight != 0 {
		t.Errorf("%d permits in flight, want 0", s.InFlight)
	}
	if s := tr.Stats(); s.Retries != 0 {
		t.Errorf("stats %+v: the breach was retried", s)
	}
}

// A request whose deadline passes before the backend answers is a timeout,
// the overload signal the Throttler counts as no accept; only a caller that
// left (cancelled) says nothing about the backend. Real sockets: the server
// holds every request until the client gives up on it. Real time too: a
// bubble's clock does not move while a goroutine waits on a socket.
func TestTransportTimedOutAttemptIsNoAccept(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 1 }}) // never rejects
	tr, _ := NewTransport(TransportConfig{Limiter: th, Retry: RetryPolicy{MaxAttempts: 1}})
	defer tr.CloseIdleConnections()
	const n = 10
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		_, err := get(t, tr, ctx, srv.URL)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline", err)
		}
	}
	// n requests, no accept: P = n/(n+1). Counting each timeout as an
	// accept gives 0, and a backend too slow to answer is never throttled.
	if got, want := th.RejectProbabilityAt(time.Now()), float64(n)/(n+1); got != want {
		t.Errorf("after %d timed-out requests: P = %v, want %v", n, got, want)
	}
	if s := th.Stats(); s.InFlight != 0 {
		t.Errorf("%d permits in flight, want 0", s.InFlight)
	}
}

// A transport error that no retry can cure says nothing about the
// backend's load: its permit is released as Ignore. Released as Dropped,
// it raised a Throttler's rejection probability, and the caller's next
// requests were throttled locally: a certificate error turned into
// sluice.ErrThrottled, for this backend and every other request to it.
func TestTransportPermanentErrorIsNoOverloadSignal(t *testing.T) {
	tlsSrv := untrusted(t)
	synctest.Test(t, func(t *testing.T) {
		th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }}) // rejects whenever P > 0
		tr, _ := NewTransport(TransportConfig{Base: trustingNothing(), Limiter: th})
		for i := range 3 {
			_, err := get(t, tr, t.Context(), tlsSrv.URL)
			var cv *tls.CertificateVerificationError
			if !errors.As(err, &cv) {
				t.Fatalf("request %d: err = %v, want the certificate error", i+1, err)
			}
		}
		if p := th.RejectProbabilityAt(time.Now()); p != 0 {
			t.Errorf("after 3 certificate errors: P = %v, want 0", p)
		}
		if s := th.Stats(); s.InFlight != 0 {
			t.Errorf("%d permits in flight, want 0", s.InFlight)
		}
	})
}

// A retry that the Transport's own limiter rejects was never sent: it must
// not spend the retry budget, and the caller gets the answer that called
// for it (here the server's 503, body and all) rather than a local
// throttling error about a retry it did not ask for. Real sockets; the
// bubble ends only when every connection goroutine has, so a body left
// open fails the test.
func TestTransportRetryRejectedLocally(t *testing.T) {
	srv := newScript(t, reply{status: 503, retryAfter: "1"})
	synctest.Test(t, func(t *testing.T) {
		// One request earns one retry: Ratio 1, no floor.
		b := oneRetryBudget(t)
		// A fresh throttler admits the first attempt (P = 0); its 503
		// makes P = 1/2, and the draw of 0 rejects the retry.
		th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }})
		base := bubbleBase()
		tr, _ := NewTransport(TransportConfig{Base: base, Limiter: th, Retry: RetryPolicy{Budget: b, Random: func() float64 { return 0 }}})
		resp, err := get(t, tr, t.Context(), srv.srv.URL)
		if err != nil {
			t.Errorf("RoundTrip: %v; want the server's 503", err)
		} else {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || rerr != nil || string(body) != http.StatusText(http.StatusServiceUnavailable) {
				t.Errorf("RoundTrip = %d %q (read error %v); want 503 %q", resp.StatusCode, body, rerr, http.StatusText(http.StatusServiceUnavailable))
			}
		}
		if n := len(srv.hits()); n != 1 {
			t.Errorf("server saw %d attempts, want 1", n)
		}
		if s := tr.Stats(); s.Requests != 1 || s.Retries != 0 || s.Rejected != 1 {
			t.Errorf("stats %+v, want 1 request, no retry, 1 rejected", s)
		}
		if !b.TryRetry() {
			t.Error("the budget's one retry is gone: the retry rejected locally spent it")
		}
		if s := th.Stats(); s.InFlight != 0 {
			t.Errorf("%d permits in flight, want 0", s.InFlight)
		}
	})
}

// The same over pooled keep-alive connections, the way a Transport is
// used: the 503 returned after its retry was rejected is read in full, its
// connection goes back to the pool when the caller closes it (the next
// request reuses it), and nothing is left behind. Outside a bubble: a
// pooled connection's goroutine waits on its socket. No Retry-After and a
// jitter of 0, so no time passes.
func TestTransportRetryRejectedLocallyKeepAlive(t *testing.T) {
	others := goleak.IgnoreCurrent() // what earlier tests left is theirs to answer for
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy, try later")
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	b := oneRetryBudget(t)
	th, _ := NewThrottler(ThrottlerConfig{Random: func() float64 { return 0 }})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, _ := NewTransport(TransportConfig{Base: base, Limiter: th, Retry: RetryPolicy{Budget: b, Random: func() float64 { return 0 }}})
	resp, err := get(t, tr, t.Context(), srv.URL+"/busy")
	if err != nil {
		t.Fatalf("RoundTrip: %v; want the server's 503", err)
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || rerr != nil || string(body) != "busy, try later" {
		t.Fatalf("RoundTrip = %d %q (read error %v); want the 503 and its body", resp.StatusCode, body, rerr)
	}
	if s := tr.Stats(); s.Retries != 0 || s.Rejected != 1 || !b.TryRetry() {
		t.Fatalf("stats %+v; want no retry counted and the budget's retry still there", s)
	}
	next, err := (&http.Client{Transport: base}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, next.Body)
	next.Body.Close()
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1: the 503's was not given back to the pool", n)
	}
	base.CloseIdleConnections()
	srv.Close()
	goleak.VerifyNone(t, others)
}
