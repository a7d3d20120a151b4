package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
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
		// A nil pointer in the interface passed New and panicked on the
		// first request.
		{"nil limiter pointer", okHandler, Config{Limiter: (*concurrency.Limiter)(nil)}, "Config.Limiter"},
		{"nil per-key pointer", okHandler, Config{Limiter: b, PerKey: (*keyed.Buckets)(nil)}, "Config.PerKey"},
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
			var ce *sluice.ConfigError
			if !errors.As(err, &ce) || !strings.HasSuffix(ce.Field, tt.field) {
				t.Errorf("New = %v; want an sluice.ErrInvalidConfig naming %s", err, tt.field)
			}
		})
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
			if !slices.Equal(codes, want) {
				t.Errorf("statuses %v, want %v", codes, want)
			}
		})
	}
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
	// The two keyless requests share defaultFallbackKey's bucket.
	if !slices.Equal(codes, []int{200, 429, 200}) {
		t.Errorf("statuses %v, want [200 429 200]", codes)
	}
	if got := h.Stats().FallbackKeys; got != 2 {
		t.Errorf("FallbackKeys = %d, want 2", got)
	}
	if b, err := m.Get(defaultFallbackKey); err != nil || b.Tokens() >= 1 {
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
	if served != 3 || s.Admitted != 3 || s.Requests != 3 || s.WouldReject[sluice.ReasonRate] != 2 || s.RejectedTotal() != 0 {
		t.Errorf("served %d, stats %+v; want 3 served, 2 would-reject, none rejected", served, s)
	}
}

func TestWaitEndedByContextIsNotARejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }), Config{Limiter: lim, MaxWait: time.Hour})
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
		if s.Canceled != 1 || s.RejectedTotal() != 0 || s.Admitted != 1 || s.Requests != 2 {
			t.Errorf("stats %+v: want 2 requests: 1 canceled, 0 rejected, 1 admitted", s)
		}
	})
}

func TestNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A bucket without MaxWait makes Acquire wait for the next token,
		// within the middleware's MaxWait; NoWait turns that into an
		// immediate 429.
		b := bucket(t, rate.Config{Rate: 1, Burst: 1})
		for _, noWait := range []bool{true, false} {
			h := mustNew(t, okHandler, Config{Limiter: b, NoWait: noWait, MaxWait: 2 * time.Second})
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

func TestLongKeysAreDigested(t *testing.T) {
	var seen []string
	m, err := keyed.New(keyed.Config[*rate.Bucket]{New: func(key string) (*rate.Bucket, error) {
		seen = append(seen, key)
		return rate.NewBucket(rate.Config{Rate: 0.001, Burst: 1})
	}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 10*MaxKeyLen)
	h := mustNew(t, okHandler, Config{PerKey: m, NoWait: true, Key: func(r *http.Request) (string, bool) {
		return long + r.URL.Path, true
	}})
	codes := []int{
		serve(h, httptest.NewRequest("GET", "/a", nil)).Code,
		serve(h, httptest.NewRequest("GET", "/b", nil)).Code, // differs only past the cut
		serve(h, httptest.NewRequest("GET", "/a", nil)).Code,
	}
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Errorf("statuses %v, want [200 200 429]: long keys must stay distinct", codes)
	}
	for _, k := range seen[1:] { // seen[0] is keyed's overflow key
		if len(k) > MaxKeyLen {
			t.Errorf("stored a %d-byte key", len(k))
		}
	}
}

func TestLimiterErrorsAreCounted(t *testing.T) {
	boom := errors.New("boom")
	m := failingMap(t, boom)
	var got error
	h := mustNew(t, okHandler, Config{PerKey: m, Key: HeaderKey("K"), OnReject: func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		WriteRejection(w, r, err)
	}})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("K", "bad")
	w := serve(h, r)
	if w.Code != http.StatusServiceUnavailable || !errors.Is(got, boom) {
		t.Errorf("status %d, OnReject got %v; want 503 and the limiter's error", w.Code, got)
	}
	if s := h.Stats(); s.Errors != 1 || s.Canceled != 0 || s.RejectedTotal() != 0 {
		t.Errorf("stats %+v: want 1 error, nothing else", s)
	}
}

// A foreign limiter's reason beyond sluice's own is counted as unknown,
// as sluice.All counts it, in dry run too: it used to wrap around to
// another reason (NumReasons+1 was counted as rate).
func TestForeignReasonCountsAsUnknown(t *testing.T) {
	foreign := rejecter{reason: sluice.NumReasons + 1}
	for _, dry := range []bool{false, true} {
		h := mustNew(t, okHandler, Config{Limiter: foreign, DryRun: dry, NoWait: true})
		serve(h, httptest.NewRequest("GET", "/", nil))
		s := h.Stats()
		counts := s.Rejected
		if dry {
			counts = s.WouldReject
		}
		var want [sluice.NumReasons]uint64
		want[sluice.ReasonUnknown] = 1
		if counts != want {
			t.Errorf("dry run %v: counted by reason %v, want %v", dry, counts, want)
		}
	}
}

// Dry run admits every request, one a limiter failed to decide too: the
// error is counted, the request served.
func TestDryRunServesLimiterErrors(t *testing.T) {
	boom := errors.New("boom")
	m := failingMap(t, boom)
	for _, cfg := range []Config{
		{PerKey: m, Key: HeaderKey("K"), DryRun: true},
		{Limiter: failing{boom}, DryRun: true},
	} {
		h := mustNew(t, okHandler, cfg)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("K", "bad")
		if w := serve(h, r); w.Code != http.StatusOK {
			t.Errorf("per key %v: dry run answered %d to a limiter's error, want 200", cfg.PerKey != nil, w.Code)
		}
		if s := h.Stats(); s.Errors != 1 || s.Admitted != 1 || s.Requests != 1 || s.WouldRejectTotal() != 0 {
			t.Errorf("per key %v: stats %+v, want 1 request, admitted, with 1 error", cfg.PerKey != nil, s)
		}
	}
}

// failingMap is a keyed.Map whose New fails with err for the key "bad".
func failingMap(t *testing.T, err error) *keyed.Map[*rate.Bucket] {
	t.Helper()
	m, e := keyed.New(keyed.Config[*rate.Bucket]{New: func(key string) (*rate.Bucket, error) {
		if key == "bad" {
			return nil, err
		}
		return rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	}})
	if e != nil {
		t.Fatal(e)
	}
	return m
}

// failing is a limiter that fails to decide.
type failing struct{ err error }

func (f failing) Acquire(context.Context) (sluice.Permit, error) { return sluice.Permit{}, f.err }
func (f failing) TryAcquire() (sluice.Permit, error)             { return sluice.Permit{}, f.err }
func (f failing) Stats() sluice.Stats                            { return sluice.Stats{} }

// When the global limit refuses, the client's per-key token is given back:
// a client must not pay its quota for the server's overload.
func TestGlobalRejectionRefundsPerKeyToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := perIPBuckets(t, rate.Config{Rate: 0.001, Burst: 1})
		lim, err := concurrency.New(concurrency.Config{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				<-release
			}
		}), Config{PerKey: m, Limiter: lim, NoWait: true})
		req := func(path, ip string) *http.Request {
			r := httptest.NewRequest("GET", path, nil)
			r.RemoteAddr = ip + ":1"
			return r
		}
		done := make(chan struct{})
		go func() { serve(h, req("/hold", "192.0.2.1")); close(done) }()
		synctest.Wait() // 192.0.2.1 holds the only global slot

		if w := serve(h, req("/", "192.0.2.2")); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("server full: status %d, want 503", w.Code)
		}
		close(release)
		<-done
		if w := serve(h, req("/", "192.0.2.2")); w.Code != http.StatusOK {
			t.Errorf("after the 503 the client's only token is gone: status %d, want 200", w.Code)
		}
		if w := serve(h, req("/", "192.0.2.2")); w.Code != http.StatusTooManyRequests {
			t.Errorf("third request: status %d, want 429 (burst 1)", w.Code)
		}
		if s := h.Stats(); s.RejectedPerKey != 1 || s.Rejected[sluice.ReasonLimit] != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// In dry run a client over its per-key share is served anyway, so the
// global concurrency limit must count it in flight like any other.
func TestDryRunPerKeyRejectionStillHoldsGlobal(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var inFlight []int
	h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight = append(inFlight, lim.Stats().InFlight)
	}), Config{PerKey: perIPBuckets(t, rate.Config{Rate: 0.001, Burst: 1}), Limiter: lim, DryRun: true})
	for range 2 {
		if w := serve(h, httptest.NewRequest("GET", "/", nil)); w.Code != http.StatusOK {
			t.Fatalf("dry run answered %d", w.Code)
		}
	}
	s := h.Stats()
	if !slices.Equal(inFlight, []int{1, 1}) || lim.Stats().InFlight != 0 {
		t.Errorf("global in flight during the requests %v, after %d; want [1 1], 0", inFlight, lim.Stats().InFlight)
	}
	if s.WouldReject[sluice.ReasonRate] != 1 || s.WouldRejectTotal() != 1 || s.Admitted != 2 || s.Succeeded != 2 {
		t.Errorf("stats %+v: want 2 admitted and succeeded, 1 would-reject for rate", s)
	}
}

// The other way round: in dry run a request the global limit would refuse
// is served, and its key's concurrency limit counts it in flight.
func TestDryRunGlobalRejectionStillHoldsPerKey(t *testing.T) {
	global, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := keyed.New(keyed.Config[*concurrency.Limiter]{
		New: func(string) (*concurrency.Limiter, error) { return concurrency.New(concurrency.Config{Limit: 1}) }, MaxKeys: 16})
	if err != nil {
		t.Fatal(err)
	}
	inFlight := -1
	h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, _ := perKey.Get("k")
		inFlight = l.Stats().InFlight
	}), Config{Limiter: global, PerKey: perKey, Key: func(*http.Request) (string, bool) { return "k", true }, DryRun: true})
	hold, err := global.TryAcquire() // the global limit is full
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Cancel()
	if w := serve(h, httptest.NewRequest("GET", "/", nil)); w.Code != http.StatusOK {
		t.Fatalf("dry run answered %d", w.Code)
	}
	l, _ := perKey.Get("k")
	if inFlight != 1 || l.Stats().InFlight != 0 {
		t.Errorf("per-key in flight while served %d, after %d; want 1, 0", inFlight, l.Stats().InFlight)
	}
	if s := h.Stats(); s.WouldReject[sluice.ReasonLimit] != 1 {
		t.Errorf("stats %+v: want 1 would-reject for the limit", s)
	}
}

// By default a request waits for admission, but boundedly: 200 concurrent
// requests from one client over its rate leave at most MaxWaitingPerKey (8)
// of them waiting, and so at most 8 tokens of debt in its bucket; the rest
// are answered 429 at once, and the waiters within MaxWait (1s).
func TestDefaultWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perIP, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 1}})
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, okHandler, Config{PerKey: perIP})
		const n = 200
		var running atomic.Int64
		codes := make(chan int, n)
		for range n {
			running.Add(1)
			go func() {
				defer running.Add(-1)
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1234"
				codes <- serve(h, r).Code
			}()
		}
		synctest.Wait() // every request is either answered or blocked
		if got := running.Load(); got > 8 {
			t.Errorf("%d requests still in the middleware, want at most 8", got)
		}
		if s := h.Stats(); s.Waiting > 8 {
			t.Errorf("Stats.Waiting = %d, want at most 8", s.Waiting)
		}
		if tk := perIP.Tokens("192.0.2.1"); tk < -8 {
			t.Errorf("bucket %v tokens in debt, want at most 8", -tk)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := running.Load(); got != 0 {
			t.Fatalf("%d requests still waiting after MaxWait", got)
		}
		close(codes)
		count := map[int]int{}
		for c := range codes {
			count[c]++
		}
		if count[200] < 2 || count[200] > 10 || count[200]+count[429] != n {
			t.Errorf("statuses %v: want 2 to 10 admitted (the burst and the waiters), the rest 429", count)
		}
	})
}

// A request queued in a concurrency limiter without a MaxWait of its own
// waits the middleware's MaxWait, then gets 503 (queue_timeout): neither a
// wait without bound nor a "client went away".
func TestWaitEndsAtMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 10})
		if err != nil {
			t.Fatal(err)
		}
		held, err := lim.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(sluice.Ignore, 0)
		h := mustNew(t, okHandler, Config{Limiter: lim, MaxWait: 300 * time.Millisecond})
		start := time.Now()
		w := serve(h, httptest.NewRequest("GET", "/", nil))
		if w.Code != http.StatusServiceUnavailable || time.Since(start) != 300*time.Millisecond {
			t.Errorf("status %d after %v, want 503 after MaxWait (300ms)", w.Code, time.Since(start))
		}
		if s := h.Stats(); s.Rejected[sluice.ReasonQueueTimeout] != 1 || s.Canceled != 0 || s.Waiting != 0 {
			t.Errorf("stats %+v, want one queue_timeout rejection, nobody waiting", s)
		}
	})
}

// ValidPolicyName is the rule New applies to RatePolicy.Name, byte for
// byte, so a caller that checks names up front refuses what New would.
func TestValidPolicyNameIsNewsRule(t *testing.T) {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	for c := range 256 {
		name := "a" + string(byte(c)) + "b"
		_, err := New(okHandler, Config{Limiter: b, Policy: &RatePolicy{Name: name, Quota: 1, Window: time.Second}})
		if valid := ValidPolicyName(name); valid != (err == nil) {
			t.Errorf("ValidPolicyName(%q) = %v, New: %v", name, valid, err)
		}
	}
	if !ValidPolicyName("") {
		t.Error(`ValidPolicyName("") = false: RatePolicy.Name's default applies`)
	}
}
