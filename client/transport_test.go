package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
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
)

// reply is one scripted answer from the test server.
type reply struct {
	status     int
	retryAfter string
	hangUp     bool // close the connection without answering
}

// script is a real loopback server that answers from a list, then 200, and
// records the bodies it received.
type script struct {
	srv *httptest.Server

	mu      sync.Mutex
	replies []reply
	bodies  []string
}

func newScript(t *testing.T, replies ...reply) *script {
	s := &script{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		rp := reply{status: http.StatusOK}
		if len(s.replies) > 0 {
			rp, s.replies = s.replies[0], s.replies[1:]
		}
		s.mu.Unlock()
		if rp.hangUp {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if rp.retryAfter != "" {
			w.Header().Set("Retry-After", rp.retryAfter)
		}
		w.WriteHeader(rp.status)
		io.WriteString(w, http.StatusText(rp.status))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) hits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// stamps wraps the base transport and records when each attempt left, in
// the bubble's virtual time.
type stamps struct {
	base  http.RoundTripper
	start time.Time
	at    []time.Duration
}

func (s *stamps) RoundTrip(r *http.Request) (*http.Response, error) {
	s.at = append(s.at, time.Since(s.start))
	return s.base.RoundTrip(r)
}

// bubbleBase is a base transport for use inside a synctest bubble: without
// keep-alives no connection goroutine outlives its exchange, so the bubble can
// tell when everything is idle and advance its clock.
func bubbleBase() *stamps {
	return &stamps{base: &http.Transport{DisableKeepAlives: true}, start: time.Now()}
}

func get(t *testing.T, rt http.RoundTripper, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

func TestTransportRetries(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name    string
		replies []reply
		random  float64
		status  int
		at      []time.Duration // when each attempt was sent
		retries uint64
	}{
		{"Retry-After in seconds is honoured", []reply{{503, "2", false}, {429, "3", false}}, 0, 200, []time.Duration{0, 2 * s, 5 * s}, 2},
		// A synctest bubble's clock starts at 2000-01-01 00:00:00 UTC.
		{"Retry-After as a date is honoured", []reply{{503, "Sat, 01 Jan 2000 00:00:04 GMT", false}}, 0, 200, []time.Duration{0, 4 * s}, 1},
		{"malformed Retry-After falls back to jitter", []reply{{503, "soon", false}, {503, "-1", false}}, 0.5, 200, []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond}, 2},
		{"huge Retry-After stops at once", []reply{{503, "99999999999999999999", false}}, 0, 503, []time.Duration{0}, 0},
		{"Retry-After beyond MaxDelay stops at once", []reply{{429, "11", false}}, 0, 429, []time.Duration{0}, 0},
		{"gives up after 3 attempts", []reply{{503, "1", false}, {503, "1", false}, {503, "1", false}}, 0, 503, []time.Duration{0, s, 2 * s}, 2},
		{"500 is not retried", []reply{{500, "1", false}}, 0, 500, []time.Duration{0}, 0},
		{"a dropped connection is retried for GET", []reply{{hangUp: true}}, 0, 200, []time.Duration{0, 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScript(t, tt.replies...)
			synctest.Test(t, func(t *testing.T) {
				base := bubbleBase()
				tr, err := NewTransport(TransportConfig{Base: base, Retry: RetryPolicy{Random: func() float64 { return tt.random }}})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := get(t, tr, t.Context(), srv.srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
				}
				if !equalDurations(base.at, tt.at) {
					t.Fatalf("attempts sent at %v, want %v", base.at, tt.at)
				}
				if st := tr.Stats(); st.Retries != tt.retries || st.Requests != 1 {
					t.Fatalf("stats = %+v, want %d retries", st, tt.retries)
				}
			})
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTransportBudgetExhaustion: against a server that always says 503, a
// shared 10% budget holds retries to a tenth of the requests.
func TestTransportBudgetExhaustion(t *testing.T) {
	replies := make([]reply, 1000)
	for i := range replies {
		replies[i] = reply{status: 503, retryAfter: "1"}
	}
	srv := newScript(t, replies...)
	synctest.Test(t, func(t *testing.T) {
		budget, err := NewRetryBudget(RetryBudgetConfig{MinPerSecond: -1, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase(), Retry: RetryPolicy{Budget: budget}})
		const requests = 50
		for range requests {
			resp, err := get(t, tr, t.Context(), srv.srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("status %d, want the server's 503 once retries stop", resp.StatusCode)
			}
		}
		st := tr.Stats()
		t.Logf("%+v, server saw %d attempts", st, len(srv.hits()))
		if st.Retries != requests/10 {
			t.Fatalf("%d retries for %d requests, want %d (10%%)", st.Retries, requests, requests/10)
		}
		if st.BudgetDenied == 0 {
			t.Fatal("no retry was denied by the budget")
		}
		if got := len(srv.hits()); got != requests+int(st.Retries) {
			t.Fatalf("server saw %d attempts, want %d", got, requests+int(st.Retries))
		}
	})
}

func TestTransportReplaysBodies(t *testing.T) {
	srv := newScript(t, reply{status: 503, retryAfter: "0"}, reply{status: 503, retryAfter: "0"})
	synctest.Test(t, func(t *testing.T) {
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.srv.URL, strings.NewReader("payload"))
		resp, err := tr.RoundTrip(req) // NewRequest sets GetBody for a strings.Reader
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := srv.hits(); resp.StatusCode != 200 || len(got) != 3 || got[0] != "payload" || got[2] != "payload" {
			t.Fatalf("status %d, server received %q; want 200 after 3 attempts of \"payload\"", resp.StatusCode, got)
		}
	})
}

func TestTransportDoesNotRetryUnsafe(t *testing.T) {
	t.Run("body that cannot be replayed", func(t *testing.T) {
		srv := newScript(t, reply{status: 503, retryAfter: "0"})
		synctest.Test(t, func(t *testing.T) {
			tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.srv.URL, io.NopCloser(bytes.NewBufferString("x")))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 || len(srv.hits()) != 1 {
				t.Fatalf("status %d after %d attempts, want 503 after 1", resp.StatusCode, len(srv.hits()))
			}
		})
	})
	t.Run("PUT without GetBody after a dropped connection", func(t *testing.T) {
		srv := newScript(t, reply{hangUp: true})
		synctest.Test(t, func(t *testing.T) {
			tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.srv.URL, io.NopCloser(bytes.NewBufferString("x")))
			if _, err := tr.RoundTrip(req); err == nil {
				t.Fatal("no error, want the transport error: the body cannot be sent again")
			}
			if n, s := len(srv.hits()), tr.Stats(); n != 1 || s.Retries != 0 {
				t.Fatalf("%d attempts, stats %+v; want 1 and no retry", n, s)
			}
		})
	})
	t.Run("POST after a dropped connection", func(t *testing.T) {
		srv := newScript(t, reply{hangUp: true})
		synctest.Test(t, func(t *testing.T) {
			tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.srv.URL, strings.NewReader("x"))
			if _, err := tr.RoundTrip(req); err == nil {
				t.Fatal("no error, want the transport error: the POST may have been done")
			}
			if n := len(srv.hits()); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
		})
	})
}

func TestTransportStopsAtDeadline(t *testing.T) {
	srv := newScript(t, reply{status: 503, retryAfter: "2"})
	synctest.Test(t, func(t *testing.T) {
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		resp, err := get(t, tr, ctx, srv.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || time.Since(start) != 0 {
			t.Fatalf("status %d after %v, want the 503 at once: a 2s wait cannot fit in 1s", resp.StatusCode, time.Since(start))
		}
	})
}

// A caller that leaves during the backoff gets its context's error; the
// retry was never sent, so it is given back to the budget and not counted.
func TestTransportCancelledDuringBackoff(t *testing.T) {
	srv := newScript(t, reply{status: 503, retryAfter: "5"})
	synctest.Test(t, func(t *testing.T) {
		b := oneRetryBudget(t)
		tr, _ := NewTransport(TransportConfig{Base: bubbleBase(), Retry: RetryPolicy{Budget: b}})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		if _, err := get(t, tr, ctx, srv.srv.URL); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if s := tr.Stats(); s.Requests != 1 || s.Retries != 0 {
			t.Errorf("stats %+v, want 1 request and no retry", s)
		}
		if !b.TryRetry() {
			t.Error("the budget's one retry is gone: the retry cancelled in its backoff spent it")
		}
	})
}

// leaves answers 503 once the caller has left: cancel is called while the
// attempt is out.
type leaves struct {
	cancel context.CancelFunc
	calls  int
}

func (l *leaves) RoundTrip(r *http.Request) (*http.Response, error) {
	l.calls++
	l.cancel()
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// TestTransportCancelledAttemptIsNotCharged: a 503 that comes back after
// the caller left is returned as it is, without a retry taken from the
// budget or counted, and its permit is released. The retry was decided,
// charged and counted, then the wait returned the context's error.
func TestTransportCancelledAttemptIsNotCharged(t *testing.T) {
	b := oneRetryBudget(t)
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	base := &leaves{cancel: cancel}
	tr, _ := NewTransport(TransportConfig{Base: base, Limiter: lim, Retry: RetryPolicy{Budget: b}})
	resp, err := get(t, tr, ctx, "http://example.invalid/")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || base.calls != 1 {
		t.Errorf("RoundTrip = %v, %v after %d attempts; want the 503 after 1", resp, err, base.calls)
	}
	if err == nil {
		resp.Body.Close()
	}
	if s := tr.Stats(); s.Requests != 1 || s.Retries != 0 || s.BudgetDenied != 0 {
		t.Errorf("stats %+v, want 1 request and no retry", s)
	}
	if !b.TryRetry() {
		t.Error("the budget's one retry is gone: the cancelled attempt took it")
	}
	if s := lim.Stats(); s.InFlight != 0 {
		t.Errorf("%d permits in flight, want 0", s.InFlight)
	}
}

// TestTransportReleasesPermits uses a Throttler as the limiter and reads its
// window to see each attempt's outcome: a 503 counts no accept, a 200 counts
// one, and the permit is held until the body is closed.
func TestNewTransportValidates(t *testing.T) {
	if _, err := NewTransport(TransportConfig{Retry: RetryPolicy{MaxAttempts: -1}}); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatalf("err = %v, want sluice.ErrInvalidConfig", err)
	}
}

// noBody answers 429 without a Body (net/http allows a RoundTripper that),
// then 200.
type noBody struct{ calls int }

func (b *noBody) RoundTrip(r *http.Request) (*http.Response, error) {
	b.calls++
	if b.calls == 1 {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}, Request: r}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// A retried response without a Body is retried like any other: no panic,
// and the permit of its attempt comes back.
func TestTransportRetriesResponseWithoutBody(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransport(TransportConfig{Base: &noBody{}, Limiter: lim, Retry: RetryPolicy{BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", "http://example.invalid/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	if s := lim.Stats(); s.InFlight != 0 {
		t.Errorf("in flight %d after the body closed, want 0", s.InFlight)
	}
}

// untrusted is a real loopback TLS server with a self-signed certificate
// (httptest's).
func untrusted(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// trustingNothing is bubbleBase trusting no root certificate, whatever the
// machine's: a TLS handshake with untrusted fails with an x509 error, the
// same on every attempt.
func trustingNothing() *stamps {
	s := bubbleBase()
	s.base.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool()}
	return s
}

// refusing returns the address of a loopback port nothing listens on.
func refusing(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestTransportPermanentErrors: a transport error that every retry would
// meet again is returned at once, as the base transport returned it,
// without a wait or a retry taken from the budget. A refused connection
// still is retried.
func TestTransportPermanentErrors(t *testing.T) {
	tlsSrv := untrusted(t)
	plain := newScript(t)
	host := strings.TrimPrefix(plain.srv.URL, "http://")
	refused := refusing(t)
	tests := []struct {
		name     string
		url      string
		header   string // a header name to set
		attempts int
		check    func(error) bool
	}{
		{"unsupported protocol scheme", "ftp://" + host + "/", "", 1, nil},
		{"no host", "http:///path", "", 1, nil},
		{"invalid header", plain.srv.URL, "Bad Name", 1, nil},
		{"untrusted certificate", tlsSrv.URL, "", 1, func(err error) bool {
			var cv *tls.CertificateVerificationError
			var ua x509.UnknownAuthorityError
			return errors.As(err, &cv) && errors.As(err, &ua)
		}},
		{"HTTPS to an HTTP server", "https://" + host + "/", "", 1, func(err error) bool {
			var rh tls.RecordHeaderError
			return errors.As(err, &rh)
		}},
		{"connection refused is retried", "http://" + refused + "/", "", 3, func(err error) bool {
			var op *net.OpError
			return errors.As(err, &op)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := trustingNothing()
				tr, err := NewTransport(TransportConfig{Base: base, Retry: RetryPolicy{Random: func() float64 { return 0.5 }}})
				if err != nil {
					t.Fatal(err)
				}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tt.header != "" {
					req.Header[tt.header] = []string{"x"}
				}
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want a transport error", resp.StatusCode)
				}
				if tt.check != nil && !tt.check(err) {
					t.Errorf("err = %v (%T), not the error expected", err, err)
				}
				retries := uint64(tt.attempts - 1)
				if st := tr.Stats(); len(base.at) != tt.attempts || st.Retries != retries {
					t.Fatalf("%d attempts over %v, %d retries charged (err: %v); want %d attempts",
						len(base.at), time.Since(start), st.Retries, err, tt.attempts)
				}
				if tt.attempts == 1 && time.Since(start) != 0 {
					t.Fatalf("returned after %v, want at once", time.Since(start))
				}
			})
		})
	}
}

// A body whose GetBody fails cannot be sent again: the retries end there,
// and the caller gets the last answer at once, with no retry charged. The
// retry was decided and charged, the backoff slept, then GetBody's error
// replaced the server's answer.
func TestTransportGetBodyFails(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply reply
	}{
		{"after a 503", reply{status: 503, retryAfter: "1"}},
		{"after a dropped connection", reply{hangUp: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScript(t, tt.reply)
			synctest.Test(t, func(t *testing.T) {
				tr, _ := NewTransport(TransportConfig{Base: bubbleBase()})
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.srv.URL, strings.NewReader("x"))
				spent := errors.New("body already spent")
				req.GetBody = func() (io.ReadCloser, error) { return nil, spent }
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				if errors.Is(err, spent) || time.Since(start) != 0 || len(srv.hits()) != 1 {
					t.Fatalf("RoundTrip = %v after %v and %d attempts; want the server's answer at once", err, time.Since(start), len(srv.hits()))
				}
				if tt.reply.status != 0 && (err != nil || resp.StatusCode != tt.reply.status) {
					t.Fatalf("RoundTrip = %v, %v; want the %d", resp, err, tt.reply.status)
				}
				if s := tr.Stats(); s.Retries != 0 {
					t.Fatalf("stats %+v, want no retry charged", s)
				}
			})
		})
	}
}

// A timeout of one attempt, with the caller's deadline still ahead, is
// transient: the request is retried, and the second attempt answers. Real
// time: a bubble's clock does not move while the transport waits on a
// socket.
func TestTransportRetriesAnAttemptThatTimedOut(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			<-r.Context().Done() // hold the first attempt until the client gives up on it
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{ResponseHeaderTimeout: 10 * time.Millisecond}
	defer base.CloseIdleConnections()
	tr, _ := NewTransport(TransportConfig{Base: base, Retry: RetryPolicy{BaseDelay: time.Microsecond}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := get(t, tr, ctx, srv.URL)
	if err != nil {
		t.Fatalf("RoundTrip: %v, want the second attempt's 200", err)
	}
	resp.Body.Close()
	if s := tr.Stats(); resp.StatusCode != 200 || hits.Load() != 2 || s.Retries != 1 {
		t.Fatalf("status %d after %d attempts, stats %+v; want 200 after 2", resp.StatusCode, hits.Load(), s)
	}
}
