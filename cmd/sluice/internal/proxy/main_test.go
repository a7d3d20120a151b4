package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is a proxy serving on loopback sockets, stopped by the test's
// cleanup.
type running struct {
	s     *Server
	url   string // the proxy
	admin string // the admin API
	path  string // its config file
	done  chan error
}

// writeConfig writes text to a file in dir, with UPSTREAM replaced.
func writeConfig(t testing.TB, path, text, upstream string) {
	text = strings.ReplaceAll(text, "UPSTREAM", upstream)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start runs a proxy with the config text (UPSTREAM replaced by upstream).
func start(t *testing.T, text, upstream string) *running {
	t.Helper()
	return startWith(t, text, upstream, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}

// startWith is start with the proxy's log going to log, and prepare (if
// not nil) called on the Server before it serves, to wrap its handlers.
func startWith(t *testing.T, text, upstream string, log *slog.Logger, prepare func(*Server)) *running {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, text, upstream)
	s, err := New(path, log)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
	}
	ln := listen(t)
	aln := listen(t)
	r := &running{s: s, url: "http://" + ln.Addr().String(), admin: "http://" + aln.Addr().String(), path: path, done: make(chan error, 1)}
	go func() { r.done <- s.Serve(ln, aln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-r.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// upstream is a loopback HTTP server running h, closed by the cleanup.
func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln := listen(t)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// holdOnPath is an upstream whose requests to /hold signal entered
// and then wait until the test closes hold (before the cleanup closes the
// server, which waits for its handlers).
func holdOnPath(t *testing.T) (url string, entered <-chan struct{}, hold chan struct{}) {
	t.Helper()
	hold = make(chan struct{})
	in := make(chan struct{}, 1)
	url = upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			in <- struct{}{}
			<-hold
		}
	})
	return url, in, hold
}

// client is an HTTP client of its own, whose idle connections the test's
// cleanup closes (goleak).
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func newReq(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// waitFor polls cond every 10 ms until it holds, for at most within, and
// reports whether it held. For what a test cannot wait on directly: the
// proxy seeing a socket close, a file change, a Redis client closing.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
