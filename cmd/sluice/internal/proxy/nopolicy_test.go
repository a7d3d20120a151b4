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

// routes[].timeout bounds the upload of a route without a policy too: an
// upstream that stops reading a body gets 504 at the timeout (it was a
// 502 after the upstream's own timeout, or never).
func TestStalledUploadBoundedWithoutPolicy(t *testing.T) {
	ln := listen(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // and never read
		}
	}()
	t.Cleanup(func() { ln.Close() })
	p := start(t, `
routes:
  - {name: np, upstream: UPSTREAM, timeout: 300ms}
`, "http://"+ln.Addr().String())
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
	select {
	case code := <-done:
		if code != 0 && code != http.StatusGatewayTimeout {
			t.Errorf("status %d, want 504 (or the connection closed)", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer 10 s after a 300ms timeout: nothing ended the stalled upload")
	}
	if v := answered(t, p, "np", "504"); v != 1 {
		t.Errorf("requests_total{code=504} = %v, want 1", v)
	}
}
