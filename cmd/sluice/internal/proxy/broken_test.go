package proxy

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log's destination, read while the proxy writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// answered is sluice_proxy_requests_total{route, code}, 0 if absent.
func answered(t *testing.T, p *running, route, code string) float64 {
	t.Helper()
	fams := scrape(t, p)
	for _, m := range fams["sluice_proxy_requests_total"].GetMetric() {
		if hasLabel(m, "route", route) && hasLabel(m, "code", code) {
			return m.Counter.GetValue()
		}
	}
	return 0
}

// An answer whose body breaks off (ReverseProxy then panics with
// http.ErrAbortHandler, for net/http to close the connection) is still
// counted and logged: 499 when the client went away, 502 when the
// upstream did.
func TestBrokenOffAnswerIsRecorded(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upstream-breaks" {
			w.Header().Set("Content-Length", "100000")
			_, _ = io.WriteString(w, "0123456789")
			w.(http.Flusher).Flush()
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		// Until the proxy, whose client left, stops reading.
		chunk := make([]byte, 64<<10)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	var log lockedBuffer
	p := startWith(t, `
reload: {poll: 0s}
log: {access: true}
routes:
  - {name: api, upstream: UPSTREAM, policy: c, flush_interval: -1ns}
policies:
  - {name: c, concurrency: {limit: 5}}
`, up, slog.New(slog.NewTextHandler(&log, nil)), nil)
	pol := p.s.cur.Load().policies["c"]

	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "GET /client-leaves HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil { // the status line: the body is on its way
		t.Fatal(err)
	}
	conn.Close()
	if !waitFor(10*time.Second, func() bool { return answered(t, p, "api", "499") == 1 }) {
		t.Errorf("a client that left mid-body: requests_total{code=499} = %v, want 1", answered(t, p, "api", "499"))
	}

	resp, err := client(t).Get(p.url + "/upstream-breaks")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("the client read a whole body from an upstream that broke off")
	}
	if !waitFor(10*time.Second, func() bool { return answered(t, p, "api", "502") == 1 }) {
		t.Errorf("an upstream that broke off mid-body: requests_total{code=502} = %v, want 1", answered(t, p, "api", "502"))
	}

	for _, want := range []string{"path=/client-leaves status=499", "path=/upstream-breaks status=502"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("no access log line with %q in:\n%s", want, log.String())
		}
	}
	if n := pol.conc.Stats().InFlight; n != 0 {
		t.Errorf("%d in flight after both ended", n)
	}
}

// A request no route matches is logged like any other: the docs promise
// one access log line per request, and /metrics counts it (route "").
func TestNoRouteIsLogged(t *testing.T) {
	var log lockedBuffer
	p := startWith(t, `
log: {access: true}
routes:
  - {name: api, path_prefix: /api, upstream: UPSTREAM}
`, upstream(t, readAll), slog.New(slog.NewTextHandler(&log, nil)), nil)
	resp, _ := get(t, client(t), newReq(t, "GET", p.url+"/elsewhere"))
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
	if want := `route="" remote=127.0.0.1:`; !strings.Contains(log.String(), want) ||
		!strings.Contains(log.String(), "path=/elsewhere status=404 bytes=9") {
		t.Errorf("no access log line of the unrouted request in:\n%s", log.String())
	}
	if v := answered(t, p, "", "404"); v != 1 {
		t.Errorf("requests_total{route=\"\",code=404} = %v, want 1", v)
	}
}
