package redisstore

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// Buckets and KeyedConcurrency are per-key limiters for the middleware.
var (
	_ httplimit.Keyed = (*Buckets)(nil)
	_ httplimit.Keyed = (*KeyedConcurrency)(nil)
)

// Two replicas of a service behind the middleware share one client's
// quota through Redis: 3 requests in all, whichever replica they hit, then
// 429 with a Retry-After (whole seconds, rounded up).
func TestMiddlewarePerKeyAcrossReplicas(t *testing.T) {
	newStore(t, Config{}) // flush
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	var urls []string
	for range 2 {
		s := openStore(t, srv.URL(), Config{Timeout: time.Second}, false)
		b := newBuckets(t, s, RateConfig{Rate: 0.5, Burst: 3})
		h, err := httplimit.New(ok, httplimit.Config{
			PerKey: b,
			Key:    func(r *http.Request) (string, bool) { return r.Header.Get("X-Client"), true },
		})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	codes := []int{}
	var retry string
	for i := range 5 {
		req, _ := http.NewRequest("GET", urls[i%2], nil)
		req.Header.Set("X-Client", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			retry = resp.Header.Get("Retry-After")
		}
	}
	want := []int{200, 200, 200, 429, 429}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("statuses %v, want %v", codes, want)
		}
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 s (one token at 0.5/s, rounded up)", retry)
	}
}
