package httplimit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

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
		if got := alg.outcomes(); !slices.Equal(got, want) {
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
	// A client can have its whole response (the hijacking handler's
	// before it even returns) while the middleware is still releasing:
	// wait for the middleware to finish with every request before reading
	// what the handlers saw and the stats.
	paths := []string{"/flush", "/hijack", "/copy"}
	served := make(chan struct{}, len(paths))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	defer srv.Close()
	for _, path := range paths {
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
	for range paths {
		<-served
	}
	if !flushed || deadlineErr != nil || !hijacked {
		t.Errorf("flushed %v, SetWriteDeadline %v, hijacked %v; want true, nil, true", flushed, deadlineErr, hijacked)
	}
	// The hijacked request's 500 was written by hand, past the middleware:
	// its outcome is Ignore, not Dropped.
	if s := h.Stats(); s.Succeeded != 2 || s.Ignored != 1 || s.Dropped != 0 {
		t.Errorf("stats %+v, want 2 succeeded, 1 ignored", s)
	}
}

// The same path with a real adaptive algorithm: overload signals from the
// handler shrink the limit, a client that left does not.
func TestOutcomesDriveAIMD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alg, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: 8, Backoff: 0.5, Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lim, err := concurrency.New(concurrency.Config{Algorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/overloaded":
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case "/slow":
				<-r.Context().Done()
			}
		}), Config{Limiter: lim})
		limit := func() float64 { return lim.Stats().Limit }

		serve(h, httptest.NewRequest("GET", "/overloaded", nil))
		if got := limit(); got != 4 {
			t.Fatalf("after a 503: limit %v, want 4", got)
		}
		time.Sleep(2 * time.Second) // past AIMD's interval
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		serve(h, httptest.NewRequestWithContext(ctx, "GET", "/slow", nil))
		cancel()
		if got := limit(); got != 2 {
			t.Fatalf("after a request outlived its deadline: limit %v, want 2", got)
		}
		time.Sleep(2 * time.Second)
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		serve(h, httptest.NewRequestWithContext(ctx, "GET", "/slow", nil))
		if got := limit(); got != 2 {
			t.Fatalf("after a client left: limit %v, want 2 (nothing learnt)", got)
		}
	})
}

func TestOutcomeOutOfRangeIsIgnore(t *testing.T) {
	alg := &recorder{limit: 4}
	lim, err := concurrency.New(concurrency.Config{Algorithm: alg})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []sluice.Outcome{3, 200} {
		h := mustNew(t, okHandler, Config{Limiter: lim, Outcome: func(*http.Request, int) sluice.Outcome { return o }})
		serve(h, httptest.NewRequest("GET", "/", nil))
		if s := h.Stats(); s.Ignored != 1 {
			t.Errorf("Outcome returning %v: stats %+v, want it released as Ignore", o, s)
		}
	}
	if got := alg.outcomes(); len(got) != 0 || lim.Stats().InFlight != 0 {
		t.Errorf("algorithm saw %v, in flight %d; want nothing learnt, nothing held", got, lim.Stats().InFlight)
	}
}

// A panic in a hook (Remaining, Outcome) is a panic in the request, like
// one in the handler: the permits still come back, as Ignore.
func TestHookPanicReleasesPermits(t *testing.T) {
	boom := func() { panic("boom") }
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"Remaining", Config{Policy: &RatePolicy{Quota: 1, Window: time.Second,
			Remaining: func(string) (int, time.Duration) { boom(); return 0, 0 }}}},
		{"Outcome", Config{Outcome: func(*http.Request, int) sluice.Outcome { boom(); return sluice.Success }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := concurrency.New(concurrency.Config{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			m := perIPBuckets(t, rate.Config{Rate: 1, Burst: 1})
			cfg := tc.cfg
			cfg.Limiter, cfg.PerKey = lim, m
			h := mustNew(t, okHandler, cfg)
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the hook's panic did not reach the server")
					}
				}()
				serve(h, httptest.NewRequest("GET", "/", nil))
			}()
			b, _ := m.Get("192.0.2.1") // httptest.NewRequest's RemoteAddr
			if got := lim.Stats().InFlight; got != 0 || b.Tokens() >= 1 {
				t.Errorf("in flight %d, per-key tokens %v after the panic; want 0 and the token spent", got, b.Tokens())
			}
			if s := h.Stats(); s.Ignored != 1 {
				t.Errorf("stats %+v, want the request released as Ignore", s)
			}
		})
	}
}

// errClientDeadline is how an application (the sluice proxy's
// deadline_header) marks a deadline that a client chose, in a header from a
// peer that is not a trusted proxy: the cause of the context's end.
var errClientDeadline = fmt.Errorf("the deadline the client sent passed: %w", context.DeadlineExceeded)

// A request that outlives a deadline its client chose is no overload
// signal: any client sending a 1 ms timeout would otherwise shrink the
// adaptive limit that every client shares. Its outcome is what it would be
// without the deadline (the handler's answer), and the limiter and Stats
// agree on it. A plain deadline (context.WithTimeout: the server's, or a
// trusted proxy's) is still Dropped.
func TestClientDeadlineIsNoOverloadSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cause  error // nil: a plain deadline
		status int   // the late answer
		want   sluice.Outcome
	}{
		{"plain deadline", nil, http.StatusOK, sluice.Dropped},
		{"client's deadline, late 200", errClientDeadline, http.StatusOK, sluice.Success},
		{"client's deadline, late 502", errClientDeadline, http.StatusBadGateway, sluice.Dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				alg := &recorder{limit: 4}
				lim, err := concurrency.New(concurrency.Config{Algorithm: alg})
				if err != nil {
					t.Fatal(err)
				}
				h := mustNew(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					time.Sleep(50 * time.Millisecond) // past the 10 ms deadline
					w.WriteHeader(tc.status)
				}), Config{Limiter: lim})
				ctx, cancel := context.WithTimeoutCause(t.Context(), 10*time.Millisecond, tc.cause)
				defer cancel()
				serve(h, httptest.NewRequestWithContext(ctx, "GET", "/", nil))

				if got := alg.outcomes(); !slices.Equal(got, []sluice.Outcome{tc.want}) {
					t.Errorf("limiter saw %v, want [%v]", got, tc.want)
				}
				s := h.Stats()
				got := [3]uint64{s.Succeeded, s.Dropped, s.Ignored}
				want := [3]uint64{}
				want[tc.want] = 1
				if got != want {
					t.Errorf("Stats: succeeded, dropped, ignored %v, want %v", got, want)
				}
			})
		})
	}
}

// panicker is a global Limiter that panics once, then admits: a bug in a
// limiter of the application's (or in a composition holding one).
type panicker struct{ armed atomic.Bool }

func (l *panicker) Acquire(context.Context) (sluice.Permit, error) { return l.TryAcquire() }

func (l *panicker) TryAcquire() (sluice.Permit, error) {
	if l.armed.Swap(false) {
		panic("limiter bug")
	}
	return sluice.Permit{}, nil
}

func (l *panicker) Stats() sluice.Stats { return sluice.Stats{} }

// A panic in the global limiter, once the per-key permit is taken, is a
// panic in the request like one in the handler: the per-key permit comes
// back (cancelled: the work never ran), or the key would be locked out.
func TestLimiterPanicReturnsPerKeyPermit(t *testing.T) {
	for _, noWait := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWait=%v", noWait), func(t *testing.T) {
			perKey, err := keyed.New(keyed.Config[*concurrency.Limiter]{
				New: func(string) (*concurrency.Limiter, error) { return concurrency.New(concurrency.Config{Limit: 1}) },
			})
			if err != nil {
				t.Fatal(err)
			}
			lim := &panicker{}
			lim.armed.Store(true)
			h := mustNew(t, okHandler, Config{PerKey: perKey, Limiter: lim, NoWait: noWait})
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the limiter's panic did not reach the server")
					}
				}()
				serve(h, httptest.NewRequest("GET", "/", nil))
			}()
			if w := serve(h, httptest.NewRequest("GET", "/", nil)); w.Code != http.StatusOK {
				t.Errorf("after the limiter's panic: status %d, want 200: the key's only slot leaked", w.Code)
			}
			if s := h.Stats(); s.Waiting != 0 {
				t.Errorf("Waiting = %d after every request ended", s.Waiting)
			}
		})
	}
}
