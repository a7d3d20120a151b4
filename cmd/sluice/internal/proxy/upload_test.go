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

// uploadConfig is a route whose adaptive limit (AIMD: every Dropped cuts
// it from 20) shows whether a request counted as the upstream's overload.
const uploadConfig = `
reload: {poll: 0s}
routes:
  - {name: up, upstream: UPSTREAM, policy: a, timeout: TIMEOUT, on_client_gone: GONE}
policies:
  - name: a
    concurrency:
      adaptive: {algorithm: aimd, initial_limit: 20, min_limit: 1, max_limit: 100}
`

func uploadProxy(t *testing.T, gone, timeout string, up http.HandlerFunc) (*running, *policy) {
	t.Helper()
	p := start(t, strings.NewReplacer("GONE", gone, "TIMEOUT", timeout).Replace(uploadConfig), upstream(t, up))
	return p, p.s.cur.Load().policies["a"]
}

// readAll is an upstream that reads the whole body, then answers 200.
func readAll(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
}

// post sends the headers of a POST with a 10-byte body and the first
// bytes of that body on a connection of its own.
func post(t *testing.T, p *running, first string) net.Conn {
	t.Helper()
	return rawRequest(t, p, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"+first)
}

func status(t *testing.T, conn net.Conn) int {
	t.Helper()
	code, _ := answer(t, conn)
	return code
}

// A client that does not send its body within the route's timeout is the
// slow party, not the upstream: it is answered 408 and its request is no
// overload signal, or any client could bring the shared limit down by
// uploading a byte at a time.
func TestSlowUploadIsNotOverload(t *testing.T) {
	for _, gone := range []string{ClientGoneWait, ClientGoneCancel} {
		t.Run(gone, func(t *testing.T) {
			p, pol := uploadProxy(t, gone, "200ms", readAll)
			for range 3 {
				if code := status(t, post(t, p, "x")); code != http.StatusRequestTimeout {
					t.Errorf("a body that stopped coming: %d, want 408", code)
				}
			}
			if l := pol.conc.Stats().Limit; l != 20 {
				t.Errorf("adaptive limit %v after three slow uploads, want 20 (counted as the upstream's overload)", l)
			}
		})
	}
}

// A client that leaves in the middle of its upload: nothing the upstream
// did, so no overload signal either (with on_client_gone: wait the
// request used to take the broken upload for a 502).
func TestUploadBrokenOffIsNotOverload(t *testing.T) {
	for _, gone := range []string{ClientGoneWait, ClientGoneCancel} {
		t.Run(gone, func(t *testing.T) {
			p, pol := uploadProxy(t, gone, "10s", readAll)
			for range 3 {
				conn := post(t, p, "xx")
				if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 1 }) {
					t.Fatal("the request was not admitted")
				}
				conn.Close()
				if !waitFor(10*time.Second, func() bool { return pol.conc.Stats().InFlight == 0 }) {
					t.Fatal("the request did not end when its client left")
				}
			}
			if l := pol.conc.Stats().Limit; l != 20 {
				t.Errorf("adaptive limit %v after three uploads broken off, want 20 (counted as the upstream's overload)", l)
			}
		})
	}
}

// Once the client has sent its whole body the upstream is timed from
// then: an upload of 0.6 s and an upstream that answers 0.6 s after it
// fit a 1 s timeout.
func TestUploadTimeoutCountsFromItsEnd(t *testing.T) {
	p, pol := uploadProxy(t, ClientGoneWait, "1s", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(600 * time.Millisecond) // the upstream's own time
		_, _ = io.WriteString(w, "ok")
	})
	conn := post(t, p, "x")
	time.Sleep(600 * time.Millisecond) // the client's upload
	if _, err := io.WriteString(conn, "xxxxxxxxx"); err != nil {
		t.Fatal(err)
	}
	if code := status(t, conn); code != http.StatusOK {
		t.Errorf("status %d, want 200: the upstream had its whole timeout after the upload", code)
	}
	if l := pol.conc.Stats().Limit; l < 20 {
		t.Errorf("adaptive limit %v, want at least 20", l)
	}
}

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
