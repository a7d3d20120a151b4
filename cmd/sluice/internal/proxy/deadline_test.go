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

const deadlineConfig = `
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
      adaptive: {algorithm: aimd, initial_limit: 10}
`

// A request that outlives the deadline its client sent is Dropped, though
// the proxy has no adaptive timeout; with on_client_gone: wait its late
// answer still reaches the client, with cancel the client gets 504 at the
// deadline and the upstream request is closed.
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
		p := start(t, strings.Replace(deadlineConfig, "GONE", tc.gone, 1), up)
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
