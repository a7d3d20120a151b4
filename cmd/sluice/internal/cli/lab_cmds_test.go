package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingOn = regexp.MustCompile(`serving on (http://\S+/)`)

// startOrigin runs "sluice origin" in-process for d and returns its URL and
// a function that waits for it to end and returns its exit code and output.
func startOrigin(t *testing.T, d time.Duration, args ...string) (string, func() (int, string)) {
	t.Helper()
	var out, errw syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(append([]string{"origin", "-addr", "127.0.0.1:0", "-for", d.String()}, args...), &out, &errw)
	}()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			return m[1], func() (int, string) { return <-done, out.String() }
		}
		select {
		case code := <-done:
			t.Fatalf("origin exited %d: %s%s", code, out.String(), errw.String())
		default:
		}
	}
	t.Fatalf("origin did not start: %s%s", out.String(), errw.String())
	return "", nil
}

func TestOriginAndLoad(t *testing.T) {
	url, wait := startOrigin(t, 3*time.Second, "-workers", "7", "-work", "1s", "-queue", "100", "-timescale", "0.01")
	code, out, errs := run("load", "-rate", "200", "-duration", "1s", "-timeout", "500ms", "-json", url)
	if code != ExitOK {
		t.Fatalf("load: exit %d: %s", code, errs)
	}
	var res struct {
		Planned, Sent, OK int64
		Goodput           float64
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("load -json: %v\n%s", err, out)
	}
	// 7 workers at 10 ms serve 700/s: 200/s all get through.
	if res.Planned != 200 || res.Sent != 200 || res.OK != 200 || res.Goodput != 200 {
		t.Errorf("load against the origin: %+v", res)
	}
	code, out, _ = run("load", "-rate", "100", "-duration", "300ms", url)
	if code != ExitOK || !strings.Contains(out, "goodput     100.0/s") || !strings.Contains(out, "schedule") {
		t.Errorf("load summary: exit %d\n%s", code, out)
	}
	code, out = wait()
	if code != ExitOK || !strings.Contains(out, "served 230") {
		t.Errorf("origin: exit %d\n%s", code, out)
	}
}

func TestOriginFromScenario(t *testing.T) {
	_, wait := startOrigin(t, 100*time.Millisecond, slow, "-queue", "3")
	code, out := wait()
	// The file's 7 workers at 2 s (3.5/s), with the flag's queue.
	if code != ExitOK || !strings.Contains(out, "7 workers, queue 3, constant service, capacity 3.5/s") {
		t.Errorf("origin %s: exit %d\n%s", slow, code, out)
	}
}

// TestOriginChangeFlag is seed 003's slowdown from flags, scaled: 1 s of
// work (10 ms) becomes 2 s (20 ms) at 60 s (600 ms).
func TestOriginChangeFlag(t *testing.T) {
	url, wait := startOrigin(t, 2*time.Second, "-workers", "7", "-work", "1s", "-queue", "100", "-change", "60s:work=2s", "-timescale", "0.01")
	time.Sleep(700 * time.Millisecond)
	code, out, errs := run("load", "-rate", "100", "-duration", "500ms", "-json", url)
	if code != ExitOK {
		t.Fatalf("load: exit %d: %s", code, errs)
	}
	var res struct{ Success struct{ P50 time.Duration } }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Success.P50 < 20*time.Millisecond {
		t.Errorf("after the change: p50 %v, want 20ms or more", res.Success.P50)
	}
	wait()
}

// TestLoadRampAndBursts: the schedule flags become the load's schedule.
func TestLoadRampAndBursts(t *testing.T) {
	url, wait := startOrigin(t, 3*time.Second, "-workers", "100", "-work", "1ms")
	for _, tc := range []struct {
		args    []string
		planned int64
	}{
		{[]string{"-rate", "0", "-ramp-to", "200", "-duration", "1s"}, 100}, // the integral of 0 → 200/s over 1 s
		{[]string{"-rate", "10", "-step", "500ms=90", "-duration", "1s"}, 50},
		{[]string{"-rate", "10", "-burst", "20", "-burst-every", "200ms", "-burst-count", "3", "-duration", "1s"}, 70},
	} {
		code, out, errs := run(append(append([]string{"load", "-json"}, tc.args...), url)...)
		var res struct{ Planned, Sent, OK int64 }
		if err := json.Unmarshal([]byte(out), &res); code != ExitOK || err != nil {
			t.Fatalf("load %q: exit %d, %v: %s", tc.args, code, err, errs)
		}
		if d := res.Planned - tc.planned; d < -1 || d > 1 || res.OK != res.Sent {
			t.Errorf("load %q: %+v, want %d planned", tc.args, res, tc.planned)
		}
	}
	wait()
}

func TestLoadSeries(t *testing.T) {
	url, wait := startOrigin(t, 2*time.Second, "-workers", "10", "-work", "1ms")
	path := filepath.Join(t.TempDir(), "series.csv")
	code, _, errs := run("load", "-rate", "50", "-duration", "1s", "-interval", "500ms", "-series", path, url)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "t_s,offered,sent,goodput") || !strings.HasPrefix(lines[1], "0.5,50,50,50,") {
		t.Errorf("series:\n%s", data)
	}
	wait()
}

// TestLoadSeriesUnchangedOnFailure: a load that sends nothing, for bad
// input (exit 2) or an unreachable URL (exit 1), leaves an earlier -series
// file as it was.
func TestLoadSeriesUnchangedOnFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "series.csv")
	if err := os.WriteFile(path, []byte("an earlier series\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-rate", "-1", "-duration", "1s", closed}, ExitUsage},
		{[]string{"-rate", "10", "-duration", "1s", closed}, ExitFail},
	} {
		code, _, errs := run(append([]string{"load", "-series", path}, tc.args...)...)
		if code != tc.code {
			t.Errorf("load %q: exit %d, want %d: %s", tc.args, code, tc.code, errs)
		}
		if b, err := os.ReadFile(path); string(b) != "an earlier series\n" {
			t.Errorf("load %q: the series file is now %q, %v", tc.args, b, err)
		}
	}
	assertFiles(t, dir, "series.csv")
}

func TestOriginBadInput(t *testing.T) {
	dir := t.TempDir()
	bad, missing := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(bad, []byte("duration: 1m\norigin:\n  workers: 2\n  service: {kind: gamma, mean: 1s}\nload: {rate: 1}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	many, manyLater := filepath.Join(dir, "many.yaml"), filepath.Join(dir, "many-later.yaml")
	if err := os.WriteFile(many, []byte("duration: 1m\norigin:\n  workers: 200000\n  service: {kind: constant, mean: 1s}\nload: {rate: 1}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manyLater, []byte("duration: 1m\norigin:\n  workers: 2\n  service: {kind: constant, mean: 1s}\n  changes: [{at: 10s, workers: 200000}]\nload: {rate: 1}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-workers", "0", "-work", "1s"}, "origin.workers = 0"},
		{[]string{"-workers", "2"}, "origin.service.mean"},
		{[]string{"-workers", "2", "-work", "1s", "-dist", "gamma"}, "origin.service.kind"},
		{[]string{"-workers", "2", "-work", "1s", "-queue", "-5"}, "origin.queue"},
		{[]string{"-workers", "2", "-work", "1s", "-timescale", "0"}, "-timescale: must be > 0"},
		{[]string{"-workers", "2", "-work", "1s", "-error-rate", "2"}, "error_rate"},
		{[]string{"-workers", "x"}, `invalid value "x" for flag -workers`},
		{[]string{"-workers", "2", "-work", "1s", "-change", "60s"}, "want AT:work=D"},
		{[]string{"-workers", "2", "-work", "1s", "-change", "60s:speed=2"}, `unknown change "speed=2"`},
		{[]string{"-workers", "2", "-work", "1s", "-change", "60s:work=2s", "-change", "30s:workers=3"}, "origin.changes[1].at"},
		{[]string{"-work", "1s", "a.yaml", "b.yaml"}, "at most one scenario file"},
		{[]string{bad}, bad + ":4: origin.service.kind"},
		// Valid for the simulator, not for the origin: at the file's
		// line, as sluice lab and sluice load say; it had no line.
		{[]string{many}, many + ":3: origin.workers: must be at most 100000, got 200000"},
		{[]string{many, "-workers", "300000"}, "origin.workers = 300000: must be at most 100000"},
		{[]string{manyLater}, manyLater + ":5: origin.changes[0].workers: must be in [0, 100000] (0: unchanged), got 200000"},
		// A file that cannot be opened is bad input too, as for sim.
		{[]string{missing}, missing + ": no such file"},
		{[]string{"--", dir}, dir + " is a directory, not a scenario file"},
		{[]string{"--", "-"}, "not from standard input"},
	} {
		code, _, errs := run(append([]string{"origin"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("origin %q: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestOriginPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	code, _, errs := run("origin", "-addr", ln.Addr().String(), "-workers", "1", "-work", "1ms")
	if code != ExitFail || !strings.Contains(errs, "port "+port+" is in use") {
		t.Errorf("port in use: exit %d, stderr %q", code, errs)
	}
}

func TestLoadBadInput(t *testing.T) {
	dir := t.TempDir()
	bad, missing := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(bad, []byte("duration: 1m\norigin: {workers: 1, service: {kind: constant, mean: 1s}}\nload:\n  rate: -4\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Valid for the simulator, not for the load generator: the error is
	// at the file's line, as the simulator's own are.
	retries, good := filepath.Join(dir, "retries.yaml"), filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(retries, []byte("duration: 1m\norigin: {workers: 1, service: {kind: constant, mean: 1s}}\nload:\n  rate: 4\n  retries: {max: 2, backoff: 10ms}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("duration: 1m\norigin: {workers: 1, service: {kind: constant, mean: 1s}}\nload:\n  rate: 4\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "http://127.0.0.1:9/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "-1", "-duration", "1s", u}, "-rate: must be in [0, 1e+06], got -1"},
		{[]string{"-rate", "10", u}, "-duration: required (or give -scenario FILE)"},
		{[]string{"-rate", "10", "-duration", "1s"}, "missing argument"},
		{[]string{"-rate", "10", "-duration", "1s", "ftp://x/"}, "URL: must be an http:// or https:// URL, got ftp://x/"},
		{[]string{"-rate", "10", "-duration", "1s", "-arrivals", "uniform", u}, "-arrivals: must be constant or poisson"},
		{[]string{"-rate", "10", "-duration", "1s", "-step", "10s", u}, "want AT=RATE"},
		{[]string{"-rate", "10", "-duration", "1s", "-step", "2s=5", "-step", "1s=5", u}, "-step: steps[1].at: steps must be after 0 and in increasing time order, got 1s"},
		{[]string{"-rate", "10", "-duration", "1s", "-connections", "0", u}, "-connections"},
		{[]string{"-rate", "10", "-duration", "1s", "-connections", "4611686018427387904", u}, "-connections: must be in [1, 65535]"},
		{[]string{"-rate", "10", "-duration", "1s", "-max-outstanding", "4611686018427387904", u}, "-max-outstanding: must be in [1, 1000000]"},
		{[]string{"-rate", "10", "-duration", "1s", "-clients", "3", "http://example.com/"}, "-clients: distinct source addresses"},
		{[]string{"-rate", "10", "-duration", "1s", "-clients-via", "dns", u}, `-clients-via: must be "addr" or "xff"`},
		{[]string{"-rate", "10", "-duration", "1s", "-H", "nocolon", u}, "want 'Name: value'"},
		// Without -burst they were ignored: the run sent no burst.
		{[]string{"-rate", "10", "-duration", "1s", "-burst-every", "200ms", u}, "-burst-every: needs -burst"},
		{[]string{"-rate", "10", "-duration", "1s", "-burst-count", "3", "-burst-at", "1s", u}, "-burst-count, -burst-at: needs -burst"},
		{[]string{"-rate", "10", "-duration", "1s", "-H", "Bad(Name: x", u}, `-H: not a header field name, got "Bad(Name: x"`},
		{[]string{"-rate", "10", "-duration", "1s", "-timescale", "0", u}, "-timescale: must be > 0"},
		// Checked only before scaling, these ran (0 s; 1e9/s) and exited 0.
		{[]string{"-rate", "10", "-duration", "1s", "-timescale", "1e-300", u}, "-timescale: scales duration from 1s to 0s, which must be > 0, got 1e-300"},
		{[]string{"-rate", "1e6", "-duration", "10s", "-timescale", "1e-3", u}, "-timescale: scales load.rate from 1e+06 to 1e+09, which must be at most 1e+06/s, got 0.001"},
		{[]string{"-scenario", bad, u}, bad + ":4: load.rate"},
		{[]string{"-scenario", retries, u}, retries + ":5: load.retries: retries are not supported"},
		// A flag's value is the flag's error, not the file's.
		{[]string{"-scenario", good, "-timeout", "-1s", u}, "-timeout: must be >= 0 (0: none), got -1s"},
		{[]string{"-scenario", missing, u}, missing + ": no such file"},
		{[]string{"-scenario", dir, u}, dir + " is a directory, not a scenario file"},
	} {
		code, _, errs := run(append([]string{"load"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("load %q: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestLoadUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	code, _, errs := run("load", "-rate", "10", "-duration", "1m", "http://"+addr+"/")
	if code != ExitFail || !strings.Contains(errs, "unreachable") || !strings.Contains(errs, addr) {
		t.Errorf("closed port: exit %d, stderr %q", code, errs)
	}
	if el := time.Since(start); el >= time.Second {
		t.Errorf("took %v", el)
	}
}

// TestLoadFileStepsAndBursts: a scenario file's steps and bursts that the
// load generator refuses are errors at the file's line, as its rate is; a
// flag that replaces them is blamed only when given. They were blamed on
// -burst and -step, which the user never gave, with no line.
func TestLoadFileStepsAndBursts(t *testing.T) {
	dir := t.TempDir()
	head := "duration: 1m\norigin: {workers: 1, service: {kind: constant, mean: 1s}}\nload:\n  rate: 4\n"
	bursts, steps := filepath.Join(dir, "bursts.yaml"), filepath.Join(dir, "steps.yaml")
	if err := os.WriteFile(bursts, []byte(head+"  bursts: {size: 2000000, count: 1, at: 20s}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(steps, []byte(strings.Replace(head, "1m", "5s", 1)+"  steps:\n    - {at: 1s, rate: 10}\n    - {at: 2s, rate: 1500000}\npolicies: [{kind: none}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "http://127.0.0.1:9/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", bursts, u}, bursts + ":5: load.bursts.size: must be in [0, 1e+06], got 2000000"},
		{[]string{"-scenario", steps, u}, steps + ":7: load.steps[1].rate: must be in [0, 1e+06], got 1.5e+06"},
		// Replaced by a flag, the flag's value is at fault.
		{[]string{"-scenario", bursts, "-burst", "3000000", u}, "-burst: must be in [0, 1e+06], got 3000000"},
		{[]string{"-scenario", steps, "-step", "1s=2000000", u}, "-step: steps[0].rate: must be in [0, 1e+06], got 2e+06"},
		{[]string{"-scenario", steps, "-ramp-to", "2000000", u}, "-ramp-to: must be in [0, 1e+06], got 2e+06"},
		{[]string{"-rate", "1", "-duration", "1s", "-ramp-to", "2000000", u}, "-ramp-to: must be in [0, 1e+06], got 2e+06"},
	} {
		code, _, errs := run(append([]string{"load"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("load %q: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errs, tc.want)
		}
	}
}
