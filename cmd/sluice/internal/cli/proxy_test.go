package cli

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProxyCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("routes:\n  - name: a\n    upstream: http://127.0.0.1:9000\n"), 0o600)
	os.WriteFile(bad, []byte("routes:\n  - name: a\n    upstream: http://127.0.0.1:9000\n    polcy: x\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"proxy", "-check", "-config", good}, ExitOK, "ok (1 route, 0 policies)"},
		{[]string{"proxy", "-check", "-config", bad}, ExitUsage, "bad.yaml:4: routes[0].polcy: unknown key"},
		{[]string{"proxy", "-check", "-config", filepath.Join(dir, "missing.yaml")}, ExitUsage, "no such file"},
		{[]string{"proxy", "-check", "-nope"}, ExitUsage, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		code := Main(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("%q: exit %d, output %q%q; want %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}

// The command end to end: it starts, says its admin API is on loopback,
// proxies, reloads on SIGHUP, and on SIGTERM drains and exits 0, its
// log line giving the drain_timeout the reload set (it gave the first).
func TestProxyServesReloadsAndStopsOnSignals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
	go up.Serve(ln)
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(limit int, drain string) {
		text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nreload: {poll: 0s}\ndrain_timeout: %s\nroutes:\n  - {name: a, upstream: \"http://%s\", policy: p}\npolicies:\n  - {name: p, concurrency: {limit: %d}}\n", drain, ln.Addr(), limit)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(5, "30s")
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main([]string{"proxy", "-config", cfg}, io.Discard, &stderr) }()

	startLine := regexp.MustCompile(`listen=(\S+) admin=(\S+) admin_scope="loopback only"`)
	var m []string
	for deadline := time.Now().Add(20 * time.Second); m == nil && time.Now().Before(deadline); {
		m = startLine.FindStringSubmatch(stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	if m == nil {
		t.Fatalf("no start line saying the admin API is on loopback:\n%s", stderr.String())
	}
	proxyURL, adminURL := "http://"+m[1], "http://"+m[2]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	body := func(url string) string {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := body(proxyURL + "/"); got != "up" {
		t.Fatalf("through the proxy: %q", got)
	}

	write(9, "7s")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(body(adminURL+"/limits"), `"limit": 9`); {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	tr.CloseIdleConnections()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "draining requests in flight\" drain_timeout=7s") {
			t.Errorf("the shutdown line does not give the reloaded drain_timeout (7s):\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after SIGTERM:\n%s", stderr.String())
	}
}
