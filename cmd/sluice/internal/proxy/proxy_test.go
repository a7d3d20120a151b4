package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// echo answers with the route it was reached by (a header of the test's
// own), so tests see which upstream served a request.
func echo(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s xff=%s", name, r.Method, r.URL.Path, r.Header.Get("X-Forwarded-For"))
	}
}

func TestRoutesMatchHostPathMethod(t *testing.T) {
	a := upstream(t, echo("a"))
	b := upstream(t, echo("b"))
	cfg := strings.ReplaceAll(`
listen: 127.0.0.1:0
routes:
  - name: any
    upstream: UPSTREAM
  - name: api-post
    path_prefix: /api/
    methods: [POST]
    upstream: B
  - name: host
    host: example.test
    upstream: B
`, "B", b)
	p := start(t, cfg, a)
	c := client(t)
	for _, tc := range []struct {
		method, host, path, want string
	}{
		{"GET", "", "/api/x", "a GET /api/x"},
		{"POST", "", "/api/x", "b POST /api/x"},
		{"POST", "", "/other", "a POST /other"},
		{"GET", "example.test:80", "/", "b GET /"},
		{"GET", "EXAMPLE.test", "/x", "b GET /x"},
	} {
		req := newReq(t, tc.method, p.url+tc.path)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, body := get(t, c, req)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, tc.want) {
			t.Errorf("%s %s%s: %d %q, want 200 %q", tc.method, tc.host, tc.path, resp.StatusCode, body, tc.want)
		}
	}
}

func TestRateLimitAnswers429WithHeaders(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, `
routes:
  - name: api
    upstream: UPSTREAM
    policy: quota
policies:
  - name: quota
    key: header:X-API-Key
    rate: {rate: 0.1, burst: 2, per_key: true}
`, up)
	c := client(t)
	send := func(key string) *http.Response {
		req := newReq(t, "GET", p.url+"/")
		req.Header.Set("X-API-Key", key)
		resp, _ := get(t, c, req)
		return resp
	}
	for i := range 2 {
		if r := send("alice"); r.StatusCode != 200 || r.Header.Get("RateLimit") == "" {
			t.Fatalf("request %d: %d, RateLimit %q; want 200 with the field", i, r.StatusCode, r.Header.Get("RateLimit"))
		}
	}
	r := send("alice")
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d, want 429", r.StatusCode)
	}
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Header.Get("RateLimit-Policy"), `"quota";q=2;w=20`) {
		t.Errorf("429 headers: Retry-After %q, RateLimit-Policy %q", r.Header.Get("Retry-After"), r.Header.Get("RateLimit-Policy"))
	}
	if r := send("bob"); r.StatusCode != 200 {
		t.Errorf("another key: %d, want 200 (its own bucket)", r.StatusCode)
	}
}

// A client's X-Forwarded-For is read only when the peer is a trusted
// proxy: from an untrusted peer every forged address shares the peer's
// bucket.
func TestClientIPTrustsOnlyConfiguredProxies(t *testing.T) {
	up := upstream(t, echo("a"))
	for _, tc := range []struct {
		trusted string
		want    int // 200s out of 3 requests with distinct forged XFF
	}{
		{"[]", 1},
		{"[127.0.0.1/32]", 3},
	} {
		p := start(t, `
client_ip:
  trusted_proxies: `+tc.trusted+`
routes:
  - name: api
    upstream: UPSTREAM
    policy: ip
policies:
  - name: ip
    rate: {rate: 0.1, burst: 1, per_key: true}
`, up)
		c := client(t)
		ok := 0
		for i := range 3 {
			req := newReq(t, "GET", p.url+"/")
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i+1))
			if r, _ := get(t, c, req); r.StatusCode == 200 {
				ok++
			}
		}
		if ok != tc.want {
			t.Errorf("trusted %s: %d admitted, want %d", tc.trusted, ok, tc.want)
		}
	}
}

// The concurrency limit answers 503 when full; the upstream's 5xx and a
// client that leaves reach the limiter as Dropped and Ignore.
func TestConcurrencyAndOutcomes(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/fail":
			http.Error(w, "boom", 500)
		}
	})
	p := start(t, `
routes:
  - name: api
    upstream: UPSTREAM
    policy: one
policies:
  - name: one
    concurrency: {limit: 1}
`, up)
	c := client(t)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Get(p.url + "/slow")
		if err != nil {
			done <- nil
			return
		}
		resp.Body.Close()
		done <- resp
	}()
	<-entered
	if r, _ := get(t, c, newReq(t, "GET", p.url+"/x")); r.StatusCode != 503 {
		t.Errorf("second request while one in flight: %d, want 503", r.StatusCode)
	}
	close(release)
	if r := <-done; r == nil || r.StatusCode != 200 {
		t.Fatalf("first request: %v", r)
	}
	if r, _ := get(t, c, newReq(t, "GET", p.url+"/fail")); r.StatusCode != 500 {
		t.Errorf("/fail: %d", r.StatusCode)
	}
	s := p.s.cur.Load().routes[0].limit.Stats()
	if s.Succeeded != 1 || s.Dropped != 1 {
		t.Errorf("outcomes: %d succeeded, %d dropped; want 1, 1", s.Succeeded, s.Dropped)
	}
}

func TestUpstreamDownAndTimeoutAreDropped(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	dead := listen(t)
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	p := start(t, `
routes:
  - name: hang
    path_prefix: /hang
    upstream: UPSTREAM
    timeout: 50ms
    policy: c
  - name: dead
    upstream: `+deadURL+`
    policy: c
policies:
  - name: c
    concurrency: {limit: 10}
`, up)
	c := client(t)
	if r, _ := get(t, c, newReq(t, "GET", p.url+"/hang")); r.StatusCode != 504 {
		t.Errorf("hung upstream: %d, want 504", r.StatusCode)
	}
	if r, _ := get(t, c, newReq(t, "GET", p.url+"/")); r.StatusCode != 502 {
		t.Errorf("dead upstream: %d, want 502", r.StatusCode)
	}
	var dropped uint64
	for _, rt := range p.s.cur.Load().routes {
		dropped += rt.limit.Stats().Dropped
	}
	if dropped != 2 {
		t.Errorf("dropped %d, want 2", dropped)
	}
}

// A server-sent event stream passes through as it is written, and gives
// its concurrency slot back at its headers, as Ignore.
func TestSSEStreamsAndReleasesEarly(t *testing.T) {
	next := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	p := start(t, `
routes:
  - name: events
    upstream: UPSTREAM
    policy: one
policies:
  - name: one
    concurrency: {limit: 1}
`, up)
	c := client(t)
	resp, err := c.Get(p.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	pol := p.s.cur.Load().policies["one"]
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
		if n := pol.conc.Stats().InFlight; n != 0 {
			t.Fatalf("event %d: %d in flight, want 0 (released at the headers)", i, n)
		}
		next <- struct{}{}
	}
	_, _ = io.Copy(io.Discard, br)
	s := p.s.cur.Load().routes[0].limit.Stats()
	if s.Succeeded != 0 || s.Ignored != 1 {
		t.Errorf("outcomes %+v, want one Ignore", s)
	}
}

// A protocol upgrade (WebSocket's handshake) passes through: the
// connection becomes a byte pipe to the upstream, and its slot is given
// back.
func TestUpgradePassesThrough(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		fmt.Fprint(brw, "echo: "+line)
		brw.Flush()
	})
	p := start(t, `
routes:
  - name: ws
    upstream: UPSTREAM
    policy: one
policies:
  - name: one
    concurrency: {limit: 1}
`, up)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	if n := p.s.cur.Load().policies["one"].conc.Stats().InFlight; n != 0 {
		t.Errorf("%d in flight after the upgrade, want 0", n)
	}
	fmt.Fprint(conn, "hello\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: hello\n" {
		t.Errorf("through the upgraded connection: %q, %v", line, err)
	}
}

// Dry run admits everything and counts what it would have rejected.
func TestDryRun(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, `
routes:
  - name: api
    upstream: UPSTREAM
    policy: dry
policies:
  - name: dry
    dry_run: true
    rate: {rate: 0.1, burst: 1}
`, up)
	c := client(t)
	for i := range 3 {
		if r, _ := get(t, c, newReq(t, "GET", p.url+"/")); r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	if n := p.s.cur.Load().routes[0].limit.Stats().WouldReject[sluice.ReasonRate]; n != 2 {
		t.Errorf("would reject %d, want 2", n)
	}
}

// Several limits at once are all or nothing: a request refused by the
// concurrency limit does not spend a token.
func TestAllOrNothing(t *testing.T) {
	up, entered, hold := holdOnPath(t)
	p := start(t, `
routes:
  - name: api
    upstream: UPSTREAM
    policy: both
policies:
  - name: both
    rate: {rate: 0.001, burst: 3}
    concurrency: {limit: 1}
`, up)
	c := client(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Get(p.url + "/hold"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	for range 5 {
		if r, _ := get(t, c, newReq(t, "GET", p.url+"/")); r.StatusCode != 503 {
			t.Errorf("while full: %d, want 503", r.StatusCode)
		}
	}
	close(hold)
	<-done
	pol := p.s.cur.Load().policies["both"]
	if tok := pol.bucket.Tokens(); tok < 1.9 {
		t.Errorf("tokens %.2f after 5 refusals by the concurrency limit, want 2 (untouched)", tok)
	}
}

// A body still being written stream_after after the request came in makes
// the request long-lived: its slot is given back, its outcome is Ignore.
func TestLongBodyReleasesAfterStreamAfter(t *testing.T) {
	next := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 2 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	p := start(t, `
routes:
  - name: download
    upstream: UPSTREAM
    policy: one
    stream_after: 50ms
    flush_interval: -1ns
policies:
  - name: one
    concurrency: {limit: 1}
`, up)
	resp, err := client(t).Get(p.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "chunk 0\n" {
		t.Fatalf("first chunk: %q %v", line, err)
	}
	pol := p.s.cur.Load().policies["one"]
	if n := pol.conc.Stats().InFlight; n != 1 {
		t.Fatalf("%d in flight during the first chunk, want 1 (not long-lived yet)", n)
	}
	// Real time: the proxy reads the clock to tell a long body.
	time.Sleep(100 * time.Millisecond)
	next <- struct{}{}
	if line, err := br.ReadString('\n'); err != nil || line != "chunk 1\n" {
		t.Fatalf("second chunk: %q %v", line, err)
	}
	if n := pol.conc.Stats().InFlight; n != 0 {
		t.Errorf("%d in flight after stream_after, want 0", n)
	}
	next <- struct{}{}
	_, _ = io.Copy(io.Discard, br)
	if s := p.s.cur.Load().routes[0].limit.Stats(); s.Ignored != 1 || s.Succeeded != 0 {
		t.Errorf("outcomes %+v, want one Ignore", s)
	}
}
