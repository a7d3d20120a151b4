package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// rejecter rejects every request with one reason: the only way to see every
// reason's status, since no real limiter produces them all.
type rejecter struct {
	reason sluice.Reason
	after  time.Duration
}

func (l rejecter) Acquire(context.Context) (sluice.Permit, error) { return l.TryAcquire() }
func (l rejecter) TryAcquire() (sluice.Permit, error) {
	return sluice.Permit{}, sluice.Reject(l.reason, l.after)
}
func (l rejecter) Stats() sluice.Stats { return sluice.Stats{} }

func mustNew(t testing.TB, next http.Handler, cfg Config) *Handler {
	t.Helper()
	h, err := New(next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func bucket(t testing.TB, cfg rate.Config) *rate.Bucket {
	t.Helper()
	b, err := rate.NewBucket(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func perIPBuckets(t testing.TB, cfg rate.Config) *keyed.Map[*rate.Bucket] {
	t.Helper()
	m, err := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(cfg) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestStatusByReason(t *testing.T) {
	tests := []struct {
		reason sluice.Reason
		perKey bool
		want   int
	}{
		{sluice.ReasonRate, false, 429},
		{sluice.ReasonTooLarge, false, 429},
		{sluice.ReasonThrottled, false, 429},
		{sluice.ReasonLimit, false, 503},
		{sluice.ReasonQueueFull, false, 503},
		{sluice.ReasonQueueTimeout, false, 503},
		{sluice.ReasonDeadline, false, 503},
		{sluice.ReasonShed, false, 503},
		{sluice.ReasonStore, false, 503},
		{sluice.ReasonClosed, false, 503},
		{sluice.ReasonUnknown, false, 503},
		// The per-key limit is the client's own share: always 429.
		{sluice.ReasonRate, true, 429},
		{sluice.ReasonLimit, true, 429},
		{sluice.ReasonQueueTimeout, true, 429},
	}
	for _, tt := range tests {
		name := tt.reason.String() + "/perkey=" + strconv.FormatBool(tt.perKey)
		t.Run(name, func(t *testing.T) {
			var cfg Config
			l := rejecter{tt.reason, 1500 * time.Millisecond}
			if tt.perKey {
				m, err := keyed.New(keyed.Config[rejecter]{New: func(string) (rejecter, error) { return l, nil }})
				if err != nil {
					t.Fatal(err)
				}
				cfg.PerKey = m
			} else {
				cfg.Limiter = l
			}
			h := mustNew(t, okHandler, cfg)
			w := serve(h, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.want {
				t.Errorf("status %d, want %d", w.Code, tt.want)
			}
			if got := w.Header().Get("Retry-After"); got != "2" {
				t.Errorf("Retry-After %q, want 2 (1.5s rounded up)", got)
			}
			s := h.Stats()
			if s.Rejected[tt.reason] != 1 || s.RejectedTotal() != 1 {
				t.Errorf("Stats.Rejected = %v, want 1 for %v", s.Rejected, tt.reason)
			}
			if wantPK := map[bool]uint64{true: 1}[tt.perKey]; s.RejectedPerKey != wantPK {
				t.Errorf("Stats.RejectedPerKey = %d, want %d", s.RejectedPerKey, wantPK)
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Nanosecond, 1},
		{100 * time.Microsecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{1200 * time.Millisecond, 2},
		{time.Second + time.Nanosecond, 2},
		{59999 * time.Millisecond, 60},
		{time.Hour, 3600},
		{1<<63 - 1, 9223372037},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestNoRetryAfterWithoutHint(t *testing.T) {
	h := mustNew(t, okHandler, Config{Limiter: rejecter{sluice.ReasonLimit, 0}})
	w := serve(h, httptest.NewRequest("GET", "/", nil))
	if w.Code != 503 || w.Header()["Retry-After"] != nil {
		t.Errorf("status %d, Retry-After %q; want 503 and none", w.Code, w.Header()["Retry-After"])
	}
}

func TestConfigErrors(t *testing.T) {
	b := bucket(t, rate.Config{Rate: 1, Burst: 1})
	m := perIPBuckets(t, rate.Config{Rate: 1, Burst: 1})
	tests := []struct {
		name  string
		next  http.Handler
		cfg   Config
		field string
	}{
		{"nil handler", nil, Config{Limiter: b}, "next"},
		{"no limiter", okHandler, Config{}, "Limiter"},
		{"bad proxy", okHandler, Config{PerKey: m, ClientIP: IPConfig{TrustedProxies: []string{"10.0.0.0/8", "nope"}}}, "ClientIP.TrustedProxies[1]"},
		{"bad proxy header", okHandler, Config{PerKey: m, ClientIP: IPConfig{ProxyHeader: "X-Real-IP"}}, "ClientIP.ProxyHeader"},
		{"bad v6 prefix", okHandler, Config{PerKey: m, ClientIP: IPConfig{IPv6Prefix: 200}}, "ClientIP.IPv6Prefix"},
		{"ip config with custom key", okHandler, Config{PerKey: m, Key: PathKey, ClientIP: IPConfig{IPv6Prefix: 64}}, "ClientIP"},
		{"key without PerKey", okHandler, Config{Limiter: b, Key: PathKey}, "PerKey"},
		{"proxies without PerKey", okHandler, Config{Limiter: b, ClientIP: IPConfig{TrustedProxies: []string{"10.0.0.0/8"}}}, "PerKey"},
		{"blank fallback", okHandler, Config{PerKey: m, FallbackKey: "  "}, "FallbackKey"},
		{"policy quota", okHandler, Config{Limiter: b, Policy: &RatePolicy{Window: time.Second}}, "Policy.Quota"},
		{"policy window", okHandler, Config{Limiter: b, Policy: &RatePolicy{Quota: 1, Window: 1500 * time.Millisecond}}, "Policy.Window"},
		{"policy zero window", okHandler, Config{Limiter: b, Policy: &RatePolicy{Quota: 1}}, "Policy.Window"},
		{"policy name", okHandler, Config{Limiter: b, Policy: &RatePolicy{Name: `a"b`, Quota: 1, Window: time.Second}}, "Policy.Name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.next, tt.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.field+":") {
				t.Errorf("New = %v; want an ErrConfig naming %s", err, tt.field)
			}
		})
	}
}

// sfItem is one member of a structured-field list: "name";k=v;...
type sfItem struct {
	name   string
	params map[string]string
}

// parseSFList parses the subset of RFC 8941 lists the RateLimit fields use:
// string items with token or integer parameters.
func parseSFList(t *testing.T, v string) []sfItem {
	t.Helper()
	var items []sfItem
	for _, member := range strings.Split(v, ",") {
		parts := strings.Split(strings.TrimSpace(member), ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil || !strings.HasPrefix(parts[0], `"`) {
			t.Fatalf("item %q is not an sf-string", parts[0])
		}
		it := sfItem{name: name, params: map[string]string{}}
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(p, "=")
			if !ok || k == "" || k != strings.ToLower(k) {
				t.Fatalf("bad parameter %q in %q", p, v)
			}
			it.params[k] = val
		}
		items = append(items, it)
	}
	return items
}

func intParam(t *testing.T, it sfItem, k string) int64 {
	t.Helper()
	v, ok := it.params[k]
	if !ok {
		t.Fatalf("item %q has no %s parameter", it.name, k)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a non-negative sf-integer", k, v)
	}
	return n
}

func TestRateLimitFields(t *testing.T) {
	// A burst of 2 refilled at 0.5/s: the third request waits 2s for a token.
	m := perIPBuckets(t, rate.Config{Rate: 0.5, Burst: 2})
	h := mustNew(t, okHandler, Config{
		PerKey: m,
		NoWait: true,
		Policy: &RatePolicy{Name: "per-ip", Quota: 2, Window: 4 * time.Second},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	var last *http.Response
	for range 3 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last = resp
		pol := parseSFList(t, resp.Header.Get("RateLimit-Policy"))
		if len(pol) != 1 || pol[0].name != "per-ip" || intParam(t, pol[0], "q") != 2 || intParam(t, pol[0], "w") != 4 {
			t.Fatalf("RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
		}
	}
	if last.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429", last.StatusCode)
	}
	ra, err := strconv.Atoi(last.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 seconds", last.Header.Get("Retry-After"))
	}
	rl := parseSFList(t, last.Header.Get("RateLimit"))
	if len(rl) != 1 || rl[0].name != "per-ip" || intParam(t, rl[0], "r") != 0 || intParam(t, rl[0], "t") != int64(ra) {
		t.Fatalf("RateLimit %q with Retry-After %d", last.Header.Get("RateLimit"), ra)
	}
	if ct := last.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
}

func TestSpoofedForwardedForDoesNotChangeKey(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run("trusted="+strconv.FormatBool(trusted), func(t *testing.T) {
			cfg := Config{PerKey: perIPBuckets(t, rate.Config{Rate: 0.001, Burst: 1}), NoWait: true}
			if trusted {
				cfg.ClientIP.TrustedProxies = []string{"127.0.0.0/8", "::1"}
			}
			h := mustNew(t, okHandler, cfg)
			srv := httptest.NewServer(h)
			defer srv.Close()
			codes := make([]int, 0, 3)
			for _, xff := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.2"} {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				req.Header.Set("X-Forwarded-For", xff)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				codes = append(codes, resp.StatusCode)
			}
			// Untrusted peer: one key, the loopback address; every XFF is
			// ignored. Trusted: one key per forwarded client.
			want := []int{200, 429, 429}
			if trusted {
				want = []int{200, 200, 429}
			}
			if !slicesEqual(codes, want) {
				t.Errorf("statuses %v, want %v", codes, want)
			}
		})
	}
}

func slicesEqual(a, b []int) bool {
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

func TestFallbackKeyIsCounted(t *testing.T) {
	m := perIPBuckets(t, rate.Config{Rate: 0.001, Burst: 1})
	h := mustNew(t, okHandler, Config{PerKey: m, Key: HeaderKey("X-Api-Key"), NoWait: true})
	codes := []int{}
	for _, key := range []string{"", "", "a"} {
		r := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		codes = append(codes, serve(h, r).Code)
	}
	// The two keyless requests share DefaultFallbackKey's bucket.
	if !slicesEqual(codes, []int{200, 429, 200}) {
		t.Errorf("statuses %v, want [200 429 200]", codes)
	}
	if got := h.Stats().FallbackKeys; got != 2 {
		t.Errorf("FallbackKeys = %d, want 2", got)
	}
	if b, err := m.Get(DefaultFallbackKey); err != nil || b.Tokens() >= 1 {
		t.Errorf("fallback key's bucket: %v tokens, %v; want it drained", b.Tokens(), err)
	}
}

func TestDryRunAdmitsAndCounts(t *testing.T) {
	b := bucket(t, rate.Config{Rate: 0.001, Burst: 1})
	served := 0
	h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }), Config{
		Limiter: b, DryRun: true, Policy: &RatePolicy{Quota: 1, Window: time.Second},
	})
	for range 3 {
		w := serve(h, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 || w.Header()["Retry-After"] != nil || w.Header()["Ratelimit"] != nil {
			t.Fatalf("dry run answered %d with %v", w.Code, w.Header())
		}
	}
	s := h.Stats()
	if served != 3 || s.Admitted != 3 || s.WouldReject[sluice.ReasonRate] != 2 || s.RejectedTotal() != 0 {
		t.Errorf("served %d, stats %+v; want 3 served, 2 would-reject, none rejected", served, s)
	}
}

// recorder is an adaptive.Algorithm that keeps the samples it is fed and
// holds its limit: it shows what the concurrency limiter learnt.
type recorder struct {
	mu      sync.Mutex
	limit   int
	samples []adaptive.Sample
}

func (a *recorder) Observe(_ time.Time, s adaptive.Sample) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.samples = append(a.samples, s)
	return a.limit
}
func (a *recorder) Limit() int { return a.limit }
func (a *recorder) outcomes() []sluice.Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	var o []sluice.Outcome
	for _, s := range a.samples {
		o = append(o, s.Outcome)
	}
	return o
}

func TestOutcomesReachTheLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alg := &recorder{limit: 4}
		lim, err := concurrency.New(concurrency.Config{Algorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/fail":
				w.WriteHeader(http.StatusBadGateway)
			case "/notfound":
				http.NotFound(w, r)
			case "/slow", "/gone":
				time.Sleep(50 * time.Millisecond)
				<-r.Context().Done()
			case "/teapot":
				w.WriteHeader(http.StatusTeapot)
			}
		})
		h := mustNew(t, next, Config{Limiter: lim, Outcome: nil})
		serve(h, httptest.NewRequest("GET", "/ok", nil))
		serve(h, httptest.NewRequest("GET", "/fail", nil))
		serve(h, httptest.NewRequest("GET", "/notfound", nil))

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		serve(h, httptest.NewRequestWithContext(ctx, "GET", "/slow", nil))
		cancel()

		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		serve(h, httptest.NewRequestWithContext(ctx, "GET", "/gone", nil))

		want := []sluice.Outcome{sluice.Success, sluice.Dropped, sluice.Success, sluice.Dropped}
		if got := alg.outcomes(); !outcomesEqual(got, want) {
			t.Errorf("algorithm saw %v, want %v (the client that left teaches nothing)", got, want)
		}
		s := h.Stats()
		if s.Succeeded != 2 || s.Dropped != 2 || s.Ignored != 1 {
			t.Errorf("stats %+v", s)
		}
		if got := lim.Stats().InFlight; got != 0 {
			t.Errorf("InFlight = %d after every request ended", got)
		}

		// A custom classifier replaces the status rule, not the context's.
		h = mustNew(t, next, Config{Limiter: lim, Outcome: func(r *http.Request, status int) sluice.Outcome {
			if status == http.StatusTeapot {
				return sluice.Dropped
			}
			return sluice.Ignore
		}})
		serve(h, httptest.NewRequest("GET", "/teapot", nil))
		serve(h, httptest.NewRequest("GET", "/fail", nil))
		if got := alg.outcomes(); len(got) != 5 || got[4] != sluice.Dropped {
			t.Errorf("after the custom classifier the algorithm saw %v", got)
		}
	})
}

func outcomesEqual(a, b []sluice.Outcome) bool {
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

func TestPanicReleasesPermit(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler) // net/http's way to abort quietly
		}
	}), Config{Limiter: lim})
	srv := httptest.NewServer(h)
	defer srv.Close()
	if _, err := srv.Client().Get(srv.URL + "/panic"); err == nil {
		t.Fatal("aborted handler: want a client error")
	}
	// The permit is released while the panic unwinds through the
	// middleware, before net/http recovers it and closes the connection
	// the client just saw fail.
	if got := lim.Stats().InFlight; got != 0 {
		t.Fatalf("InFlight = %d after the handler panicked: the permit leaked", got)
	}
	resp, err := srv.Client().Get(srv.URL + "/after")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after a panic: status %d, want 200 (the permit came back)", resp.StatusCode)
	}
	if s := h.Stats(); s.Ignored != 1 || s.Succeeded != 1 {
		t.Errorf("stats %+v: want the panic released as Ignore", s)
	}
}

func TestWaitEndedByContextIsNotARejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }), Config{Limiter: lim})
		done := make(chan struct{})
		go func() { serve(h, httptest.NewRequest("GET", "/", nil)); close(done) }()
		synctest.Wait() // the first request holds the only permit

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel) // the second waits, then its client leaves
		w := serve(h, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", w.Code)
		}
		close(release)
		<-done
		s := h.Stats()
		if s.Canceled != 1 || s.RejectedTotal() != 0 || s.Admitted != 1 {
			t.Errorf("stats %+v: want 1 canceled, 0 rejected, 1 admitted", s)
		}
	})
}

func TestNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A bucket without MaxWait makes Acquire wait for the next token;
		// NoWait turns that into an immediate 429.
		b := bucket(t, rate.Config{Rate: 1, Burst: 1})
		for _, noWait := range []bool{true, false} {
			h := mustNew(t, okHandler, Config{Limiter: b, NoWait: noWait})
			serve(h, httptest.NewRequest("GET", "/", nil)) // drain the bucket
			start := time.Now()
			w := serve(h, httptest.NewRequest("GET", "/", nil))
			waited := time.Since(start)
			if noWait && (w.Code != 429 || waited != 0) {
				t.Errorf("NoWait: status %d after %v, want 429 at once", w.Code, waited)
			}
			if !noWait && (w.Code != 200 || waited != time.Second) {
				t.Errorf("wait: status %d after %v, want 200 after 1s", w.Code, waited)
			}
		}
	})
}

func TestWriterKeepsOptionalInterfaces(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	var flushed, hijacked bool
	var deadlineErr error
	h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			deadlineErr = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute))
			io.WriteString(w, "part")
			f, ok := w.(http.Flusher)
			if flushed = ok; ok {
				f.Flush()
			}
		case "/hijack":
			hj, ok := w.(http.Hijacker)
			if !ok {
				return
			}
			c, buf, err := hj.Hijack()
			if err != nil {
				return
			}
			hijacked = true
			buf.WriteString("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			buf.Flush()
			c.Close()
		case "/copy":
			io.Copy(w, strings.NewReader("copied"))
		}
	}), Config{Limiter: lim})
	// The hijacking handler answers the client before it returns: wait for
	// the middleware to finish with it before reading its stats.
	hijackDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/hijack" {
			close(hijackDone)
		}
	}))
	defer srv.Close()
	for _, path := range []string{"/flush", "/hijack", "/copy"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/copy" && string(body) != "copied" {
			t.Errorf("/copy body %q", body)
		}
	}
	<-hijackDone
	if !flushed || deadlineErr != nil || !hijacked {
		t.Errorf("flushed %v, SetWriteDeadline %v, hijacked %v; want true, nil, true", flushed, deadlineErr, hijacked)
	}
	// The hijacked request's 500 was written by hand, past the middleware:
	// its outcome is Ignore, not Dropped.
	if s := h.Stats(); s.Succeeded != 2 || s.Ignored != 1 || s.Dropped != 0 {
		t.Errorf("stats %+v, want 2 succeeded, 1 ignored", s)
	}
}

func TestBucketRemaining(t *testing.T) {
	tests := []struct {
		tokens    float64
		cfg       rate.Config
		wantN     int
		wantReset time.Duration
	}{
		{3, rate.Config{Rate: 1, Burst: 3}, 3, 0},
		{2, rate.Config{Rate: 1, Burst: 3}, 2, time.Second},
		{0.5, rate.Config{Rate: 2, Burst: 3}, 0, 1250 * time.Millisecond},
		{-4, rate.Config{Rate: 1, Burst: 3}, 0, 3 * time.Second}, // reservations waiting: nothing left
		{1, rate.Config{Rate: 0, Burst: 3}, 1, -1},               // never refills
		{3, rate.Config{Rate: 0, Burst: 3}, 3, 0},
		{0, rate.Config{Rate: rate.Inf, Burst: 5}, 5, 0},
		{0, rate.Config{Rate: 1e-300, Burst: 5}, 0, -1}, // refills after the end of time
	}
	for _, tt := range tests {
		n, reset := bucketRemaining(tt.tokens, tt.cfg)
		if n != tt.wantN || reset != tt.wantReset {
			t.Errorf("bucketRemaining(%v, %+v) = %d, %v; want %d, %v", tt.tokens, tt.cfg, n, reset, tt.wantN, tt.wantReset)
		}
	}
}

func TestRateLimitOnAdmittedResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := perIPBuckets(t, rate.Config{Rate: 1, Burst: 3})
		h := mustNew(t, okHandler, Config{
			PerKey: m,
			NoWait: true,
			Policy: &RatePolicy{Quota: 3, Window: 3 * time.Second, Remaining: BucketRemaining(m.Get)},
		})
		var got []string
		for range 4 {
			w := serve(h, httptest.NewRequest("GET", "/", nil))
			got = append(got, strconv.Itoa(w.Code)+" "+w.Header().Get("RateLimit"))
		}
		time.Sleep(1500 * time.Millisecond) // one token back, half of the next
		w := serve(h, httptest.NewRequest("GET", "/", nil))
		got = append(got, strconv.Itoa(w.Code)+" "+w.Header().Get("RateLimit"))
		want := []string{
			`200 "default";r=2;t=1`,
			`200 "default";r=1;t=2`,
			`200 "default";r=0;t=3`,
			`429 "default";r=0;t=1`,
			`200 "default";r=0;t=3`, // 1.5 tokens, one taken: 2.5 s to full, rounded up
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, v := range got {
			_, field, _ := strings.Cut(v, " ")
			it := parseSFList(t, field)
			if len(it) != 1 || it[0].name != "default" {
				t.Errorf("RateLimit %q does not parse back", field)
			}
			intParam(t, it[0], "r")
			intParam(t, it[0], "t")
		}
	})
}
