package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends text on a connection of its own to the proxy and
// returns the connection, for a request a client library would not send
// (a malformed chunk, a body that stops coming).
func rawRequest(t *testing.T, p *running, text string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, text); err != nil {
		t.Fatal(err)
	}
	return conn
}

// answer reads the proxy's answer on conn: its status and body.
func answer(t *testing.T, conn net.Conn) (int, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A route without a policy watches its uploads as a route with one does:
// a client whose body does not come within server.read_timeout is
// answered 408 (it was a 200 with an empty body: nothing was written), one
// whose body cannot be read 400 (it was a 502, the upstream blamed), and
// the metrics count the code the client got.
func TestUploadFailureWithoutPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
	}{
		{"no policy", ""},
		{"policy", ", policy: a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, `
server: {read_timeout: 300ms}
routes:
  - {name: r, upstream: UPSTREAM`+tc.policy+`}
policies:
  - {name: a, concurrency: {limit: 10}}
`, upstream(t, readAll))
			conn := rawRequest(t, p, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nxx")
			if code, body := answer(t, conn); code != http.StatusRequestTimeout {
				t.Errorf("a body that stopped coming past server.read_timeout: %d %q, want 408", code, body)
			}
			conn = rawRequest(t, p, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
			if code, body := answer(t, conn); code != http.StatusBadRequest {
				t.Errorf("a malformed chunk: %d %q, want 400", code, body)
			}
			for _, code := range []string{"408", "400"} {
				if v := answered(t, p, "r", code); v != 1 {
					t.Errorf("requests_total{code=%s} = %v, want 1", code, v)
				}
			}
		})
	}
}
