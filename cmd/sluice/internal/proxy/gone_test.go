package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// holding is an upstream that, like most services, finishes a request
// whatever became of its connection: it answers status once release is
// closed, unless the proxy closed the request first (canceled).
type holding struct {
	entered, release, canceled chan struct{}
}

func holdingUpstream(t *testing.T, status int) (string, *holding) {
	h := &holding{entered: make(chan struct{}, 1), release: make(chan struct{}), canceled: make(chan struct{}, 1)}
	url := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		h.entered <- struct{}{}
		select {
		case <-h.release:
			w.WriteHeader(status)
		case <-r.Context().Done():
			h.canceled <- struct{}{}
		}
	})
	return url, h
}

const goneConfig = `
routes:
  - name: api
    upstream: UPSTREAM
    policy: a
    on_client_gone: GONE
policies:
  - name: a
    concurrency:
      adaptive: {algorithm: aimd, initial_limit: 10, timeout: TIMEOUT}
`

// giveUp sends a request that the client abandons after 100ms, once the
// upstream has it.
func giveUp(t *testing.T, p *running, h *holding) {
	t.Helper()
	c := client(t)
	c.Timeout = 100 * time.Millisecond
	if resp, err := c.Get(p.url + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("the client did not time out")
	}
	<-h.entered
}

// With on_client_gone: wait (the default), a request whose client gave up
// stays in flight until the upstream answers, and the upstream's answer is
// its outcome: a late one (past the adaptive timeout) or a 5xx is Dropped,
// an early success is Success. The permit is not given back while the
// upstream still works, and the upstream's request is not cut.
func TestClientGoneWaitsForUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, timeout string
		status        int
		backOff       bool
	}{
		{"late success", "50ms", 200, true},
		{"5xx", "0s", 503, true},
		{"success, no adaptive timeout", "0s", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, h := holdingUpstream(t, tc.status)
			cfg := strings.NewReplacer("GONE", "wait", "TIMEOUT", tc.timeout).Replace(goneConfig)
			p := start(t, cfg, up)
			pol := p.s.cur.Load().policies["a"]
			giveUp(t, p, h)
			abandoned := func() float64 { return value(t, scrape(t, p), "sluice_proxy_abandoned_requests", "route", "api") }
			if !waitFor(10*time.Second, func() bool { return abandoned() == 1 }) {
				t.Fatal("sluice_proxy_abandoned_requests did not count the request whose client left")
			}
			if n := pol.conc.Stats().InFlight; n != 1 {
				t.Fatalf("%d in flight after the client left, the upstream still working; want 1", n)
			}
			close(h.release)
			if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
				t.Fatal("the permit was not given back after the upstream answered")
			}
			select {
			case <-h.canceled:
				t.Error("the upstream's request was canceled before it answered")
			default:
			}
			if got := pol.conc.Stats().Limit < 10; got != tc.backOff {
				t.Errorf("limit %v after the upstream answered %d to a departed client; want a back-off: %v",
					pol.conc.Stats().Limit, tc.status, tc.backOff)
			}
			// Counted once the handler returns, just after the release.
			if !waitFor(10*time.Second, func() bool {
				for _, m := range scrape(t, p)["sluice_proxy_requests_total"].GetMetric() {
					if hasLabel(m, "code", "499") && m.Counter.GetValue() == 1 {
						return true
					}
				}
				return false
			}) {
				t.Error("no sluice_proxy_requests_total{code=499} 1: the departed client's request was not counted as 499")
			}
			if n := abandoned(); n != 0 {
				t.Errorf("sluice_proxy_abandoned_requests %v once the upstream answered, want 0", n)
			}
		})
	}
}

// With on_client_gone: cancel, the upstream's request is closed as soon as
// the client leaves and the permit given back: Ignore, or Dropped when
// the client waited past the adaptive timeout.
func TestClientGoneCancel(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		backOff bool
	}{
		{"50ms", true},
		{"0s", false}, // no timeout: a departed client tells nothing
	} {
		up, h := holdingUpstream(t, 200)
		cfg := strings.NewReplacer("GONE", "cancel", "TIMEOUT", tc.timeout).Replace(goneConfig)
		p := start(t, cfg, up)
		pol := p.s.cur.Load().policies["a"]
		giveUp(t, p, h)
		if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
			t.Fatal("the permit was not given back when the client left")
		}
		if got := pol.conc.Stats().Limit < 10; got != tc.backOff {
			t.Errorf("adaptive timeout %s: limit %v after a client timed out; want a back-off: %v", tc.timeout, pol.conc.Stats().Limit, tc.backOff)
		}
		select {
		case <-h.canceled:
		case <-time.After(10 * time.Second):
			t.Error("the upstream's request was not canceled")
		}
	}
}

// A policy of token buckets only counts nothing in flight: its route
// closes a departed client's upstream request at once, whatever
// on_client_gone says.
func TestClientGoneRateOnlyCancels(t *testing.T) {
	up, h := holdingUpstream(t, 200)
	p := start(t, `
routes:
  - {name: api, upstream: UPSTREAM, policy: q, on_client_gone: wait}
policies:
  - name: q
    rate: {rate: 1000, burst: 1000, per_key: true}
`, up)
	giveUp(t, p, h)
	select {
	case <-h.canceled:
	case <-time.After(10 * time.Second):
		t.Error("the upstream's request was not canceled")
	}
}
