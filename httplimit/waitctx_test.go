package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
)

// timeoutLimiter is a user's limiter: it adds its own timeout to the wait
// of a real limiter, as context.WithTimeout invites. Go watches a parent
// context it does not know with a goroutine that calls the parent's Done,
// possibly after Acquire has returned.
type timeoutLimiter struct {
	sluice.Limiter
	mu   sync.Mutex
	seen []context.Context // every context Acquire was given
}

func (l *timeoutLimiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	l.mu.Lock()
	l.seen = append(l.seen, ctx)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return l.Limiter.Acquire(ctx)
}

// timeoutKeyed is the same for PerKey.
type timeoutKeyed struct{ l *timeoutLimiter }

func (k timeoutKeyed) Acquire(ctx context.Context, _ string) (sluice.Permit, error) {
	return k.l.Acquire(ctx)
}
func (k timeoutKeyed) TryAcquire(string) (sluice.Permit, error) { return k.l.TryAcquire() }

func newTimeoutLimiter(t *testing.T) *timeoutLimiter {
	t.Helper()
	c, err := concurrency.New(concurrency.Config{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return &timeoutLimiter{Limiter: c}
}

// TestForeignLimiterDerivesContext is the reviewer's reproduction: a
// limiter that derives a context from the wait context under concurrent
// requests. With pooled wait contexts, Go's watcher goroutine called Done
// on a context already returned to the pool: "cannot create context from
// nil parent", killing the process.
func TestForeignLimiterDerivesContext(t *testing.T) {
	for _, global := range []bool{true, false} {
		t.Run(fmt.Sprintf("global=%v", global), func(t *testing.T) {
			l := newTimeoutLimiter(t)
			cfg := Config{Limiter: l}
			if !global {
				cfg = Config{PerKey: timeoutKeyed{l}}
			}
			h := mustNew(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), cfg)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 300 {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
						if w.Code != http.StatusOK {
							t.Errorf("status %d, want 200", w.Code)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestForeignLimiterKeepsContext: a context handed to a limiter the
// middleware does not know is never handed to another request, and stays
// usable after the request, reporting the wait over.
func TestForeignLimiterKeepsContext(t *testing.T) {
	l := newTimeoutLimiter(t)
	h := mustNew(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Config{Limiter: l})
	const n = 50
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	if len(l.seen) != n {
		t.Fatalf("limiter asked %d times, want %d", len(l.seen), n)
	}
	distinct := map[context.Context]bool{}
	for i, ctx := range l.seen {
		distinct[ctx] = true
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("context %d after its request: panic %v", i, p)
				}
			}()
			select {
			case <-ctx.Done():
			default:
				t.Errorf("context %d: Done open after its request", i)
			}
			if ctx.Err() == nil {
				t.Errorf("context %d: Err nil after its request", i)
			}
		}()
	}
	if len(distinct) != n {
		t.Errorf("%d distinct contexts for %d requests: a context was reused", len(distinct), n)
	}
}

// TestLibraryLimitersPoolWaitContext: the library's own limiters, which
// keep no context past Acquire, still get the pooled wait context (no
// allocation for it; TestAdmitAllocations pins the figures), while any
// other limiter, even one wrapping them, does not.
func TestLibraryLimitersPoolWaitContext(t *testing.T) {
	b, err := rate.NewBucket(rate.Config{Rate: rate.Inf})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := concurrency.New(concurrency.Config{Limit: 1})
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"bucket", Config{Limiter: b}, true},
		{"concurrency", Config{Limiter: c}, true},
		{"foreign", Config{Limiter: &timeoutLimiter{Limiter: c}}, false},
		{"composition", Config{Limiter: sluice.All(b, c)}, false},
		{"bucket+foreign_keyed", Config{Limiter: b, PerKey: timeoutKeyed{&timeoutLimiter{Limiter: c}}}, false},
	} {
		h := mustNew(t, http.NotFoundHandler(), tc.cfg)
		if h.poolWait != tc.want {
			t.Errorf("%s: poolWait %v, want %v", tc.name, h.poolWait, tc.want)
		}
	}
}
