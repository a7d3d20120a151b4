package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLabBadInput: a bad scenario file or flag is exit 2, names the file,
// line and field (or the flag), and runs nothing — not even the files
// before it on the command line.
func TestLabBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := "duration: 10s\norigin:\n  workers: 2\n  service: {kind: constant, mean: 1ms}\nload: {rate: 1}\npolicies: [{kind: none, limt: 3}]\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "-out", out, slow, bad}, bad + ":6: policies[0].limt: unknown key"},
		{[]string{"lab", "-out", out, "-timescale", "2", slow}, "-timescale: must be in (0, 1]"},
		{[]string{"lab", "-out", out, "-timescale", "x", slow}, "invalid value \"x\" for flag -timescale"},
		// NaN fails every comparison: checks are written to fail it too.
		{[]string{"lab", "-out", out, "-timescale", "NaN", slow}, "-timescale: must be in (0, 1]"},
		{[]string{"lab", "-out", out, filepath.Join(dir, "missing.yaml")}, filepath.Join(dir, "missing.yaml") + ": no such file"},
		{[]string{"lab", "-out", out, "--", dir}, dir + " is a directory, not a scenario file"},
		{[]string{"lab", "-out", out, "--", "-"}, "not from standard input"},
		{[]string{"lab", "-out", out, "-policies", "static-5,nope", slow}, `-policies: no experiment has a policy named "nope"`},
		{[]string{"lab", "capacity", "-slo", "p95<275ms", "http://127.0.0.1:1/"}, "-slo: bad SLO"},
		{[]string{"lab", "capacity", "-step", "0s", "http://127.0.0.1:1/"}, "-step: must be in (0, 1h0m0s]"},
		{[]string{"lab", "capacity", "-slo", "p95<=275ms,success>=NaN%", "http://127.0.0.1:1/"}, "-slo: bad SLO"},
		{[]string{"lab", "capacity", "-slo", "pNaN<=275ms,success>=99%", "http://127.0.0.1:1/"}, "-slo: bad SLO"},
		{[]string{"lab", "capacity", "-start", "NaN", "http://127.0.0.1:1/"}, "-start: must be in (0, 1e+06]"},
		{[]string{"lab", "capacity", "-max", "NaN", "http://127.0.0.1:1/"}, "-max: must be in [-start (10), 1e+06]"},
		{[]string{"lab", "capacity", "-max", "+Inf", "http://127.0.0.1:1/"}, "-max: must be in [-start (10), 1e+06]"},
		{[]string{"lab", "capacity", "-max", "2e6", "http://127.0.0.1:1/"}, "-max: must be in [-start (10), 1e+06]"},
		{[]string{"lab", "capacity", "-precision", "NaN", "http://127.0.0.1:1/"}, "-precision: must be in [0.001, 1)"},
		{[]string{"lab", "capacity", "-precision", "1e-300", "http://127.0.0.1:1/"}, "-precision: must be in [0.001, 1)"},
		{[]string{"lab", "capacity", "-precision", "1", "http://127.0.0.1:1/"}, "-precision: must be in [0.001, 1)"},
		{[]string{"lab", "capacity", "127.0.0.1:1"}, "URL: want http:// or https://"},
		// load.Run refused these at the first step, after the service
		// had been probed, as exit 1 naming no flag of the command.
		{[]string{"lab", "capacity", "http://"}, "URL: "},
		// A port and no host: the search measured this machine's port 80.
		{[]string{"lab", "capacity", "http://:80/"}, "URL: sluice/load: url = http://:80/: has no host"},
		{[]string{"lab", "capacity", "http://:8080/x"}, "URL: sluice/load: url = http://:8080/x: has no host"},
		{[]string{"lab", "capacity", "-step", "2h", "http://127.0.0.1:1/"}, "-step: must be in (0, 1h0m0s]"},
		// No request in the step's measured window: the first step
		// "failed" and the search said no rate met the SLO.
		{[]string{"lab", "capacity", "-step", "50ms", "http://127.0.0.1:1/"}, "-step: a step of 50ms at -start 10 rps measures no request"},
		{[]string{"lab", "capacity"}, "missing argument"},
	} {
		code, stdout, stderr := run(tc.args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", tc.args, code, ExitUsage, stderr)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.want, stderr)
		}
		if stdout != "" {
			t.Errorf("%q: something ran: %s", tc.args, stdout)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the report directory was made although nothing ran: %v", err)
	}
}

// TestLabCapacityUnreachable: a URL nothing listens on is an error in
// under a second, not a search of timeouts.
func TestLabCapacityUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port that was free a moment ago: nothing listens there now
	start := time.Now()
	code, _, stderr := run("lab", "capacity", "http://"+addr+"/")
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v, want < 1s", took)
	}
	if code != ExitFail || !strings.Contains(stderr, "unreachable") || !strings.Contains(stderr, addr) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// TestLabCapacityKeepsRateOnError: a search that ends in an error after
// a rate met the SLO prints that rate, says the search did not finish, and
// gives the error (exit 1): it printed the error alone, and the rate the
// steps had found was lost. The service answers the first step, then goes
// down between the next step's drain probes (served on a connection it
// had accepted) and its load, whose first connection is refused.
func TestLabCapacityKeepsRateOnError(t *testing.T) {
	var stepped, down atomic.Bool
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if stepped.Load() && !down.Swap(true) {
			srv.Listener.Close() // the connections it accepted stay open
		}
	})
	srv.Start()
	defer srv.Close()
	var stdout bytes.Buffer
	stderr := &onWrite{f: func(p string) {
		if strings.HasPrefix(p, "step ") { // the first step's progress line
			stepped.Store(true)
		}
	}}
	code := Main([]string{"lab", "capacity", "-start", "20", "-step", "500ms", srv.URL}, &stdout, stderr)
	out := stdout.String()
	if code != ExitFail || !strings.Contains(stderr.String(), "target unreachable") {
		t.Errorf("exit %d, want %d with the error; stderr:\n%s", code, ExitFail, stderr)
	}
	for _, want := range []string{"holds up to 20.0 rps", "the search did not finish (load: target unreachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Every rate tried met the SLO, but the search did not reach -max.
	if strings.Contains(out, "raise -max") {
		t.Errorf("stdout says the capacity is above -max:\n%s", out)
	}
}

// onWrite is a buffer that calls f with each write.
type onWrite struct {
	bytes.Buffer
	f func(string)
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.f(string(p))
	return w.Buffer.Write(p)
}

// TestLabSimOnly runs a file in the simulator through the command: the
// summary, then the report's path, and the report is there.
func TestLabSimOnly(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := run("lab", "-sim-only", "-out", out, slow)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	want := "report: " + filepath.Join(out, "lab.html") + "\n"
	if !strings.HasSuffix(stdout, want) {
		t.Errorf("stdout does not end with %q:\n%s", want, stdout)
	}
	for _, f := range []string{"lab.html", "lab.json"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestStoppedIsNotUnreachable: Ctrl-C as sluice load or lab capacity
// starts is an interruption (exit 1, saying so), not an unreachable URL
// nor bad usage.
func TestStoppedIsNotUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	defer func(f func() (context.Context, context.CancelFunc)) { signalContext = f }(signalContext)
	signalContext = func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Ctrl-C at once
		return ctx, cancel
	}
	for _, args := range [][]string{
		{"load", "-rate", "10", "-duration", "1s", srv.URL},
		{"lab", "capacity", "-step", "200ms", srv.URL},
	} {
		code, _, stderr := run(args...)
		if code != ExitFail || !strings.Contains(stderr, "interrupted") || strings.Contains(stderr, "unreachable") {
			t.Errorf("%q stopped at once: exit %d, stderr %q; want exit %d, interrupted", args, code, stderr, ExitFail)
		}
	}
}

// TestLabOutUnwritable: a report that could not be written is bad usage
// found before anything runs, not after the run: the lab ran (minutes, on
// sockets) and then failed to write its report. As root a directory's
// mode does not stop a write, so the report's path is a directory here.
func TestLabOutUnwritable(t *testing.T) {
	for _, name := range []string{"lab.html", "lab.json"} {
		out := t.TempDir()
		if err := os.Mkdir(filepath.Join(out, name), 0o755); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := run("lab", "-sim-only", "-out", out, slow)
		if code != ExitUsage || !strings.Contains(stderr, "-out: ") || !strings.Contains(stderr, filepath.Join(out, name)) || stdout != "" {
			t.Errorf("%s a directory: exit %d, want %d naming -out and the file before anything runs; stdout:\n%s\nstderr:\n%s",
				name, code, ExitUsage, stdout, stderr)
		}
		assertFiles(t, out, name)
	}
}
