package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
)

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// An upstream that stops reading a request's body (overloaded, its receive
// window at 0): the transport's ResponseHeaderTimeout never starts, and
// net/http does not see the client leave before the body is read, so only
// the route's timeout from forwarding ends the request and gives its
// permit back. A route without a policy ("none") is bounded the same way:
// it was a 502 after the upstream's own timeout, or never.
func TestStalledUploadBounded(t *testing.T) {
	for _, gone := range []string{ClientGoneWait, ClientGoneCancel, "none"} {
		t.Run(gone, func(t *testing.T) { stalledUpload(t, gone) })
	}
}

// stalledUpload runs TestStalledUploadBounded with on_client_gone: gone,
// or on a route without a policy for "none".
func stalledUpload(t *testing.T, gone string) {
	ln := listen(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // and never read
		}
	}()
	t.Cleanup(func() { ln.Close() })
	config := strings.ReplaceAll(`
routes:
  - {name: api, upstream: UPSTREAM, policy: a, timeout: 300ms, on_client_gone: GONE}
policies:
  - {name: a, concurrency: {limit: 10}}
`, "GONE", gone)
	if gone == "none" {
		config = `
routes:
  - {name: api, upstream: UPSTREAM, timeout: 300ms}
`
	}
	p := start(t, config, "http://"+ln.Addr().String())

	const size = 1 << 30 // far more than the sockets' buffers
	req, _ := http.NewRequest("POST", p.url+"/", io.LimitReader(zeros{}, size))
	req.ContentLength = size
	done := make(chan int, 1)
	go func() {
		resp, err := client(t).Do(req)
		if err != nil {
			done <- 0 // the proxy closed the connection while it sent the body
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	if gone == "none" {
		select {
		case code := <-done:
			if code != 0 && code != http.StatusGatewayTimeout {
				t.Errorf("status %d, want 504 (or the connection closed)", code)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer 10 s after a 300ms timeout: nothing ended the stalled upload")
		}
		if v := answered(t, p, "api", "504"); v != 1 {
			t.Errorf("requests_total{code=504} = %v, want 1", v)
		}
		return
	}
	pol := p.s.cur.Load().policies["a"]
	if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
		t.Fatal("the permit was not given back: nothing ended the stalled upload")
	}
	if code := <-done; code != 0 && code != http.StatusGatewayTimeout {
		t.Errorf("status %d, want 504 (or the connection closed)", code)
	}
	// The proxy was waiting on the upstream, not on the client, whose
	// body was there to read: the upstream's overload (upload.go).
	rt := p.s.cur.Load().routes[0]
	if !waitFor(10*time.Second, func() bool { return rt.limit.Stats().Dropped == 1 }) {
		t.Errorf("outcomes %+v, want 1 dropped", rt.limit.Stats())
	}
}

// gateGauge holds an Inc until release, to order the client's leaving
// against the request's end.
type gateGauge struct {
	prometheus.Gauge
	entered, release, dec chan struct{}
}

func (g *gateGauge) Inc() { g.entered <- struct{}{}; <-g.release; g.Gauge.Inc() }
func (g *gateGauge) Dec() { g.Gauge.Dec(); g.dec <- struct{}{} }

// The client leaves just as the upstream fails: the request ends before
// the client's leaving is recorded. The gauge must come back to 0, and the
// failure is the outcome (Dropped), not Ignore.
func TestClientGoneAtUpstreamFailure(t *testing.T) {
	g := &gateGauge{Gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}),
		entered: make(chan struct{}), release: make(chan struct{}), dec: make(chan struct{}, 2)}
	rt := &route{spec: Route{Timeout: time.Minute}, metrics: &routeMetrics{abandoned: g}}
	cl, leave := context.WithCancel(context.Background())
	st := &reqState{ctx: cl}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leave()
		<-g.entered // counted, not yet abandoned
		upstreamError(w, r, errors.New("connection refused"))
	})
	r := httptest.NewRequest("GET", "/", nil).WithContext(context.WithValue(cl, stateKey{}, st))
	waitForUpstream{next: next, rt: rt}.ServeHTTP(httptest.NewRecorder(), r)
	close(g.release)
	select {
	case <-g.dec:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned gauge was not taken back")
	}
	var m dto.Metric
	if err := g.Gauge.Write(&m); err != nil || m.Gauge.GetValue() != 0 {
		t.Errorf("abandoned gauge %v (%v), want 0", m.Gauge.GetValue(), err)
	}
	if st.goneStatus != http.StatusBadGateway || st.goneOutcome() != sluice.Dropped {
		t.Errorf("status %d, outcome %v; want 502, Dropped", st.goneStatus, st.goneOutcome())
	}
}

// A client that left once admitted, before its request was forwarded: the
// request is not sent.
func TestClientGoneBeforeForwarding(t *testing.T) {
	cl, leave := context.WithCancel(context.Background())
	leave()
	st := &reqState{ctx: cl}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("sent upstream") })
	r := httptest.NewRequest("GET", "/", nil).WithContext(context.WithValue(cl, stateKey{}, st))
	waitForUpstream{next: next, rt: &route{}}.ServeHTTP(httptest.NewRecorder(), r)
}
