package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestClientTimeoutParses(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"2.5s": 2500 * time.Millisecond, "250ms": 250 * time.Millisecond, "2500": 2500 * time.Millisecond,
		"": 0, "0": 0, "-1s": 0, "soon": 0, "1e3": 0, "99999999999999999999": 0, "1000h": maxClientTimeout,
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("X-Timeout", v)
		d, ok := clientTimeout(r, "X-Timeout")
		if d != want || ok != (want > 0) {
			t.Errorf("%q: %v %v, want %v", v, d, ok, want)
		}
	}
}

// deadlineConfig is a route with deadline_header; TRUSTED, GONE and
// TIMEOUT are replaced by client_ip.trusted_proxies, on_client_gone and
// adaptive.timeout.
const deadlineConfig = `
client_ip:
  trusted_proxies: TRUSTED
routes:
  - name: api
    upstream: UPSTREAM
    policy: a
    deadline_header: X-Timeout
    on_client_gone: GONE
policies:
  - name: a
    max_wait: 30s
    concurrency:
      adaptive: {algorithm: aimd, initial_limit: 10, timeout: TIMEOUT}
`

func deadlineRoute(trusted, gone string, timeout time.Duration) string {
	return strings.NewReplacer("TRUSTED", trusted, "GONE", gone, "TIMEOUT", timeout.String()).Replace(deadlineConfig)
}

// A request from a trusted proxy that outlives the deadline in its header
// is Dropped, though the proxy has no adaptive timeout; with
// on_client_gone: wait its late answer still reaches the client, with
// cancel the client gets 504 at the deadline and the upstream request is
// closed.
func TestDeadlineHeaderDropsLateRequests(t *testing.T) {
	for _, tc := range []struct {
		gone    string
		timeout string // the header's value; "" none
		status  int
		backOff bool
	}{
		{"wait", "", 200, false},
		{"wait", "50ms", 200, true},
		{"cancel", "50", 504, true},
	} {
		release := make(chan struct{})
		canceled := make(chan struct{}, 1)
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
				canceled <- struct{}{}
			}
		})
		p := start(t, deadlineRoute("[127.0.0.1/32]", tc.gone, 0), up)
		req := newReq(t, "GET", p.url+"/")
		if tc.timeout != "" {
			req.Header.Set("X-Timeout", tc.timeout)
		}
		if tc.gone == "wait" {
			// The upstream answers late: 100ms, twice the deadline.
			time.AfterFunc(100*time.Millisecond, func() { close(release) })
		}
		resp, _ := get(t, client(t), req)
		if resp.StatusCode != tc.status {
			t.Errorf("%s, timeout %q: status %d, want %d", tc.gone, tc.timeout, resp.StatusCode, tc.status)
		}
		if tc.gone == "cancel" {
			select {
			case <-canceled:
			case <-time.After(10 * time.Second):
				t.Errorf("cancel: the upstream's request was not closed at the deadline")
			}
		}
		pol := p.s.cur.Load().policies["a"]
		if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
			t.Fatal("the permit was not given back")
		}
		if got := pol.conc.Stats().Limit < 10; got != tc.backOff {
			t.Errorf("%s, timeout %q: limit %v; want a back-off: %v", tc.gone, tc.timeout, pol.conc.Stats().Limit, tc.backOff)
		}
	}
}

// A client's deadline bounds its wait for admission: it is refused at its
// deadline, not at the policy's max_wait (30 s here).
func TestDeadlineHeaderBoundsTheWait(t *testing.T) {
	up, entered, hold := holdOnPath(t)
	p := start(t, `
routes:
  - {name: api, upstream: UPSTREAM, policy: one, deadline_header: X-Timeout}
policies:
  - name: one
    max_wait: 30s
    concurrency: {limit: 1, max_queue: 4}
`, up)
	c := client(t)
	c.Timeout = 10 * time.Second // past it, the deadline was not seen
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Get(p.url + "/hold"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	req := newReq(t, "GET", p.url+"/")
	req.Header.Set("X-Timeout", "100ms")
	if resp, _ := get(t, c, req); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a waiter past its deadline: %d, want 503", resp.StatusCode)
	}
	close(hold)
	<-done
}

// From a peer that is not a trusted proxy the header is the client's word:
// it bounds the client's own request (200 late with wait, 504 at the
// deadline with cancel), but its expiry is no overload signal, or any
// client could bring down the adaptive limit that all of the route's
// clients share. The outcome is what it would be without the header: the
// upstream's answer judged against the operator's adaptive.timeout (wait),
// or Ignore for an upstream request closed at the deadline (cancel).
func TestUntrustedDeadlineHeaderIsNoOverloadSignal(t *testing.T) {
	const slow = 20 * time.Millisecond // the upstream's latency, well past the 1 ms deadline
	for _, tc := range []struct {
		gone     string
		timeout  time.Duration // adaptive.timeout
		requests int
		status   int
		backOff  bool
	}{
		{"wait", 0, 3, 200, false},
		{"wait", 10 * time.Second, 3, 200, false},
		{"wait", 5 * time.Millisecond, 1, 200, true}, // slower than the operator's timeout
		{"cancel", 0, 3, 504, false},
	} {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.gone == "cancel" {
				<-r.Context().Done() // closed at the client's deadline
				return
			}
			select {
			case <-time.After(slow):
			case <-r.Context().Done():
			}
		})
		p := start(t, deadlineRoute("[]", tc.gone, tc.timeout), up)
		c := client(t)
		for range tc.requests {
			req := newReq(t, "GET", p.url+"/")
			req.Header.Set("X-Timeout", "1ms")
			if resp, _ := get(t, c, req); resp.StatusCode != tc.status {
				t.Errorf("%s, adaptive timeout %v: status %d, want %d", tc.gone, tc.timeout, resp.StatusCode, tc.status)
			}
		}
		pol := p.s.cur.Load().policies["a"]
		if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
			t.Fatal("the permit was not given back")
		}
		if got := pol.conc.Stats().Limit < 10; got != tc.backOff {
			t.Errorf("%s, adaptive timeout %v: limit %v; want a back-off: %v", tc.gone, tc.timeout, pol.conc.Stats().Limit, tc.backOff)
		}
		// Nor does the middleware count one as Dropped in its own stats
		// (the back-off of the 5 ms case is the algorithm's timeout).
		if s := p.s.cur.Load().routes[0].limit.Stats(); s.Dropped > 0 {
			t.Errorf("%s, adaptive timeout %v: the middleware counted succeeded, dropped, ignored %d, %d, %d; want none Dropped",
				tc.gone, tc.timeout, s.Succeeded, s.Dropped, s.Ignored)
		}
	}
}
