package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkServe is the cost the proxy adds to a request, in process: a
// bare httputil.ReverseProxy with the same transport settings, the sluice
// proxy without a policy, and with a per-IP bucket and an adaptive limit
// (on_client_gone: wait, the default, and cancel), each in front of the
// same trivial upstream on loopback. The wrk run of benchrig/run.sh
// measures the same through sockets.
func BenchmarkServe(b *testing.B) {
	up := benchUpstream(b)
	u, _ := url.Parse(up)
	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host; pr.SetXForwarded() },
		Transport: (&transports{}).get(DefaultTimeout),
	}
	b.Cleanup(bare.Transport.(*http.Transport).CloseIdleConnections)
	const policies = `
policies:
  - name: p
    rate: {rate: 1000000000, burst: 1000000000, per_key: true}
    concurrency: {adaptive: {initial_limit: 64}, max_queue: 1024, max_wait: 5s}
`
	policy := benchServer(b, up, `
routes:
  - {name: all, upstream: UPSTREAM, policy: p}`+policies)
	// The same policy without on_client_gone: wait (the default), whose
	// detached upstream context and watch on the client are the difference.
	cancel := benchServer(b, up, `
routes:
  - {name: all, upstream: UPSTREAM, policy: p, on_client_gone: cancel}`+policies)
	body := strings.Repeat("x", 1024)
	for _, tc := range []struct {
		name string
		h    http.Handler
		body bool // a POST of 1 KiB: the wait for its headers has a timer of its own
	}{
		{"target=bare", bare, false},
		{"target=nopolicy", benchServer(b, up, `
routes:
  - {name: all, upstream: UPSTREAM}
`), false},
		{"target=policy", policy, false},
		{"target=policy/gone=cancel", cancel, false},
		{"target=bare/body=1KiB", bare, true},
		{"target=policy/body=1KiB", policy, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", "http://proxy.test/x", nil)
					if tc.body {
						req = httptest.NewRequest("POST", "http://proxy.test/x", strings.NewReader(body))
					}
					req.RemoteAddr = "127.0.0.1:1234"
					w := httptest.NewRecorder()
					tc.h.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}

func benchUpstream(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	b.Cleanup(srv.Close)
	return srv.URL
}

func benchServer(b *testing.B, up, text string) *Server {
	path := filepath.Join(b.TempDir(), "sluice.yaml")
	writeConfig(b, path, text, up)
	s, err := New(path, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.transports.closeIdle)
	return s
}
