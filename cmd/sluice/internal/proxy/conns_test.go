package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
)

// dialProxy opens a raw connection to the proxy, closed by the cleanup.
func dialProxy(t *testing.T, p *running) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// roundTrip sends one keep-alive GET on conn and returns its status.
func roundTrip(t *testing.T, conn net.Conn, br *bufio.Reader) int {
	t.Helper()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedByProxy reports whether the proxy closes conn (EOF or reset)
// within limit, a bound far past the timeouts under test: a proxy that
// never closes it fails.
func closedByProxy(conn net.Conn, br *bufio.Reader, limit time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// An idle keep-alive connection, and one whose headers never end, are
// closed by the proxy rather than kept for ever.
func TestIdleAndSlowHeaderConnectionsClosed(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, `
server: {idle_timeout: 100ms, read_header_timeout: 100ms}
routes:
  - name: api
    upstream: UPSTREAM
`, up)

	idle := dialProxy(t, p)
	br := bufio.NewReader(idle)
	if code := roundTrip(t, idle, br); code != 200 {
		t.Fatalf("status %d", code)
	}
	if !closedByProxy(idle, br, 10*time.Second) {
		t.Error("an idle keep-alive connection was still open after 10s with idle_timeout 100ms")
	}

	slow := dialProxy(t, p)
	if _, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil { // no blank line
		t.Fatal(err)
	}
	if !closedByProxy(slow, bufio.NewReader(slow), 10*time.Second) {
		t.Error("a connection with unfinished headers was still open after 10s with read_header_timeout 100ms")
	}
}

// Past server.max_connections a new connection is answered 503 and
// closed; once one closes, a new one is served.
func TestMaxConnections(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, `
server: {max_connections: 2}
routes:
  - name: api
    upstream: UPSTREAM
`, up)
	var open []net.Conn
	for range 2 {
		c := dialProxy(t, p)
		if code := roundTrip(t, c, bufio.NewReader(c)); code != 200 {
			t.Fatalf("connection %d: status %d, want 200", len(open), code)
		}
		open = append(open, c) // kept alive, holding its slot
	}
	extra := dialProxy(t, p)
	br := bufio.NewReader(extra)
	if code := roundTrip(t, extra, br); code != http.StatusServiceUnavailable {
		t.Fatalf("third connection: status %d, want 503", code)
	}
	if !closedByProxy(extra, br, 10*time.Second) {
		t.Error("the refused connection was not closed")
	}
	open[0].Close()
	// The slot frees when the proxy sees the close: retry until it has,
	// a bounded number of times.
	var code int
	if !waitFor(10*time.Second, func() bool {
		c := dialProxy(t, p)
		defer c.Close()
		code = roundTrip(t, c, bufio.NewReader(c))
		return code == 200
	}) {
		t.Fatalf("no connection served 10s after one closed: %d", code)
	}
}

func TestServerConfig(t *testing.T) {
	c, err := ParseConfig("f.yaml", []byte("routes: [{name: a, upstream: \"http://127.0.0.1:1\"}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != defaultServer || c.Server.MaxConnections != 10000 || c.Server.IdleTimeout != 120*time.Second ||
		c.Server.ReadHeaderTimeout != 10*time.Second || c.Server.ReadTimeout != 0 {
		t.Errorf("defaults: %+v", c.Server)
	}
	for _, tc := range []struct{ edit, want string }{
		{"server:\n  max_connections: 0\n", "f.yaml:2: server.max_connections: must be within [1, 16777215], got 0"},
		{"server:\n  idle_timeout: -1s\n", "f.yaml:2: server.idle_timeout: must be >= 0"},
		{"server:\n  read_header_timeout: -1s\n", "f.yaml:2: server.read_header_timeout: must be >= 0"},
		{"server:\n  read_timeout: -1s\n", "f.yaml:2: server.read_timeout: must be >= 0"},
	} {
		_, err := ParseConfig("f.yaml", []byte(tc.edit+"routes: [{name: a, upstream: \"http://127.0.0.1:1\"}]\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("%q: %v, want %q", tc.edit, err, tc.want)
		}
	}
}
