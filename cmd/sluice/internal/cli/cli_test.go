package cli

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// run runs the command in-process and returns its exit code and output.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = Main(args, &out, &errw)
	return code, out.String(), errw.String()
}

// slow is the tests' own short scenario, so that what they check (the
// command's output and exit codes, Little's law) does not move when the
// checked-in scenarios are retuned. internal/scenario runs those.
const slow = "testdata/slow.yaml"

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"--help"}} {
		code, out, errs := run(args...)
		if code != ExitOK || errs != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
		for _, want := range []string{"Usage:", "sim ", "version ", "help "} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: usage lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestHelpCommand(t *testing.T) {
	code, out, _ := run("help", "sim")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Usage: sluice sim [flags] SCENARIO.yaml", "-json", "-plot", "-seed", "-duration"} {
		if !strings.Contains(out, want) {
			t.Errorf("help sim lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := run("help", "nope"); code != ExitUsage || !strings.Contains(errs, `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, stderr %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run("version")
	if code != ExitOK || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "go1.") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, _ := run("version", "extra"); code != ExitUsage {
		t.Errorf("version extra: exit %d, want %d", code, ExitUsage)
	}
}

// TestBadUsage: every mistake on the command line is exit 2 with a message
// naming what was wrong, and nothing runs (no report on stdout).
func TestBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"simulate"}, `unknown command "simulate"`},
		{[]string{"sim", "--bogus", slow}, "-bogus"},
		{[]string{"sim", slow, "--seed", "minus-one"}, "-seed"},
		{[]string{"sim", slow, "--duration", "10"}, "-duration"},
		{[]string{"sim", slow, "--duration", "-1s"}, "-duration: " + slow + ":6: duration: must be > 0"},
		{[]string{"sim", slow, "--duration", "0"}, "-duration: " + slow + ":6: duration: must be > 0"},
		{[]string{"sim", slow, "--duration", "20s"}, "-duration: " + slow + ":7: warmup: must be in [0, duration - interval]"},
		// Shorter than one interval: the offered rate would read 1e9/s.
		{[]string{"sim", slow, "--duration=1ns", "--warmup=0"}, "-duration, -warmup: " + slow + ":6: duration: must be at least one interval (1s), got 1ns"},
		{[]string{"sim", slow, "--warmup", "120s"}, "-warmup: " + slow + ":7: warmup: must be in [0, duration - interval]"},
		{[]string{"sim", slow, "--interval", "1ns"}, "-interval: " + slow + ":1: interval: duration 2m0s / interval 1ns is 120000000000 points"},
		{[]string{"sim", slow, "--interval", "-1s"}, "-interval: " + slow + ":1: interval: must be >= 0"},
		{[]string{"sim", slow, "--duration", "1000h"}, "-duration: " + slow + ":6: duration: duration 1000h0m0s / interval 1s is 3600000 points per policy, more than the 100000"},
		{[]string{"sim"}, "missing argument"},
		{[]string{"sim", slow, slow}, "want 1 argument(s), got 2"},
		{[]string{"sim", slow, "--plot", "out.pdf"}, "-plot: plot file must end in .svg or .png"},
		{[]string{"sim", slow, "--plot", "no/such/dir/out.svg"}, `-plot: "no/such/dir" is not a directory`},
	} {
		code, out, errs := run(tc.args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", tc.args, code, ExitUsage)
		}
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.want, errs)
		}
		if out != "" {
			t.Errorf("%q: something ran: %s", tc.args, out)
		}
	}
}

func TestSimJSON(t *testing.T) {
	// Flags after the file, as people type them.
	code, out, errs := run("sim", slow, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("not the documented JSON: %v\n%s", err, out)
	}
	if r.Version != report.Version || r.Scenario != "slow" || r.File != slow {
		t.Errorf("header: version %d, scenario %q, file %q", r.Version, r.Scenario, r.File)
	}
	names := make([]string, len(r.Policies))
	for i, p := range r.Policies {
		names[i] = p.Name
		if n := len(p.Series); n != int(r.DurationS/r.IntervalS) {
			t.Errorf("%s: %d series points, want %v", p.Name, n, r.DurationS/r.IntervalS)
		}
	}
	if got := strings.Join(names, ","); got != "none,static-5" {
		t.Errorf("policies %s", got)
	}
	// Seed 003's figures: with no protection every request times out; 5 in
	// flight at 2 s per request serve 2.3 rps of the 3.5 the origin can
	// (5 / 2.2 s: a slot freed as a request is due idles until the next).
	none, static := r.Policies[0].Summary, r.Policies[1].Summary
	if none.GoodputRPS > 0.1 || none.Timeouts == 0 {
		t.Errorf("none: goodput %v, timeouts %d; the seed has every request time out", none.GoodputRPS, none.Timeouts)
	}
	if static.GoodputRPS < 2.2 || static.GoodputRPS > 2.35 {
		t.Errorf("static-5: goodput %v, want about 2.27 (seed: 2.3)", static.GoodputRPS)
	}
	if static.CapacityRPS != 3.5 {
		t.Errorf("capacity %v, want 3.5", static.CapacityRPS)
	}
}

func TestSimTable(t *testing.T) {
	code, out, errs := run("sim", "--seed", "9", slow)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "scenario slow: 120s simulated, seed 9") {
		t.Errorf("title: %.100s", out)
	}
	if !strings.Contains(out, "POLICY") || !strings.Contains(out, "\nstatic-5 ") {
		t.Errorf("no table:\n%s", out)
	}
}

// TestSimBadFile: an invalid scenario is exit 2 with FILE:LINE: FIELD, and
// nothing runs.
func TestSimBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	src := "duration: 10s\norigin:\n  workers: 2\n  service: {kind: constant, mean: -1s}\nload: {rate: 1}\npolicies: [{kind: none}]\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("sim", path)
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	if want := path + ":4: origin.service.mean: must be > 0"; !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	if out != "" {
		t.Errorf("something ran: %s", out)
	}
}

// TestSimUnreadableFile: a scenario name that is not a readable file is
// bad input (exit 2), with a message that says why.
func TestSimUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ arg, want string }{
		{filepath.Join(dir, "nope.yaml"), "no such file"},
		{dir, dir + " is a directory"},
		{"", "file name is empty"},
		{"-", "not from standard input"},
	} {
		code, out, errs := run("sim", "--", tc.arg)
		if code != ExitUsage || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("sim %q: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.arg, code, out, errs, ExitUsage, tc.want)
		}
	}
}

// TestSimPlotUnwritable: a -plot path that cannot be written fails before
// the run (exit 2, no report), not after it.
func TestSimPlotUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "taken.svg")
	if err := os.Mkdir(path, 0o755); err != nil { // a directory: no one can create a file there
		t.Fatal(err)
	}
	code, out, errs := run("sim", slow, "--plot", path)
	if code != ExitUsage || out != "" || !strings.Contains(errs, "-plot: open "+path) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestSimPlotUnchangedOnFailure: a run that fails leaves the -plot path
// as it was: no empty file where there was none, and an earlier plot
// there untouched. The plot is written beside it and renamed on success
// only, so no temporary file is left either.
func TestSimPlotUnchangedOnFailure(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "pileup.yaml")
	// Valid, but the origin's queue grows past what a run may hold.
	src := "duration: 10s\norigin:\n  workers: 1\n  queue: -1\n  service: {kind: constant, mean: 1ms}\nload: {rate: 200000}\npolicies: [{kind: none}]\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	plot := filepath.Join(dir, "out.svg")
	code, _, errs := run("sim", bad, "--plot", plot)
	if code != ExitUsage || !strings.Contains(errs, bad+":4: origin.queue:") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(plot); !os.IsNotExist(err) {
		t.Errorf("the plot file is left behind: %v", err)
	}
	if err := os.WriteFile(plot, []byte("an earlier plot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run("sim", bad, "--plot", plot); code != ExitUsage {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if b, err := os.ReadFile(plot); string(b) != "an earlier plot" {
		t.Errorf("the earlier plot is now %q, %v", b, err)
	}
	assertFiles(t, dir, "out.svg", "pileup.yaml")
}

// assertFiles fails unless dir holds exactly names: no temporary file
// left behind.
func assertFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

// TestSimPlotReplaces: a run that succeeds replaces an earlier plot, keeps
// its mode, and writes through a symbolic link as os.Create would.
func TestSimPlotReplaces(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "run.svg")
	if err := os.WriteFile(plot, []byte("an earlier plot"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.svg")
	if err := os.Symlink("run.svg", link); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run("sim", slow, "--plot", link); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) && !bytes.HasPrefix(b, []byte("<?xml")) {
		t.Errorf("run.svg is not a new plot: %.40q, %v", b, err)
	}
	if fi, err := os.Lstat(plot); err != nil || fi.Mode() != 0o600 {
		t.Errorf("run.svg: mode %v, %v; want -rw-------", fi.Mode(), err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.svg is no longer a link: %v", err)
	}
	assertFiles(t, dir, "link.svg", "run.svg")
}

// TestSimFlagsOverride: -seed 0 is a seed like any other, and -warmup and
// -interval replace the file's.
func TestSimFlagsOverride(t *testing.T) {
	code, out, errs := run("sim", slow, "--json", "--seed", "0", "--warmup", "10s", "--interval", "4s")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Seed != 0 || r.IntervalS != 4 || len(r.Policies[0].Series) != 30 {
		t.Errorf("seed %d, interval %v s, %d points; want seed 0, 4 s, 30 points", r.Seed, r.IntervalS, len(r.Policies[0].Series))
	}
	// The window is 120 s - 10 s: the file's 30 s warm-up would leave 90 s.
	if s := r.Policies[1].Summary; s.OfferedRPS != float64(s.Sent)/110 {
		t.Errorf("offered %v rps from %d sent: not over a 110 s window", s.OfferedRPS, s.Sent)
	}
}

func TestSimPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.png")
	code, _, errs := run("sim", slow, "--plot", path, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot is not a PNG: %v", err)
	}
	if !strings.Contains(errs, "wrote "+path) {
		t.Errorf("stderr does not say where the plot went: %q", errs)
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		json bool
		pos  string
	}{
		{[]string{"a.yaml"}, false, "a.yaml"},
		{[]string{"-json", "a.yaml"}, true, "a.yaml"},
		{[]string{"a.yaml", "-json"}, true, "a.yaml"},
		{[]string{"--", "-json"}, false, "-json"}, // after "--", a file named -json
	} {
		c, _ := lookup("sim")
		fs := newFlagSet(env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, c)
		j := fs.Bool("json", false, "")
		pos, _, ok := parse(fs, tc.args, 1)
		if !ok || *j != tc.json || len(pos) != 1 || pos[0] != tc.pos {
			t.Errorf("parse(%q) = %q, json %v, ok %v", tc.args, pos, *j, ok)
		}
	}
}

// TestSimSeedAndDuration: the same seed gives the same report byte for
// byte; another seed gives another; -duration shortens the run.
func TestSimSeedAndDuration(t *testing.T) {
	const sweep = "../../../../scenarios/overload-sweep.yaml" // Poisson arrivals: the seed matters
	runJSON := func(seed string) string {
		t.Helper()
		code, out, errs := run("sim", "--json", "--duration", "5s", "--seed", seed, sweep)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return out
	}
	a, b, c := runJSON("11"), runJSON("11"), runJSON("12")
	if a != b {
		t.Error("the same seed gave two different reports")
	}
	if a == c {
		t.Error("seeds 11 and 12 gave the same report")
	}
	var r report.Report
	if err := json.Unmarshal([]byte(a), &r); err != nil {
		t.Fatal(err)
	}
	if r.DurationS != 5 || r.Seed != 11 || len(r.Policies[0].Series) != 5 {
		t.Errorf("duration %v s, seed %d, %d points; want 5 s, seed 11, 5 points", r.DurationS, r.Seed, len(r.Policies[0].Series))
	}
}

// TestEveryCommandHasHelp: a line added to commands is enough for usage
// and "sluice help NAME" to know the subcommand.
func TestEveryCommandHasHelp(t *testing.T) {
	_, usageOut, _ := run("help")
	for _, c := range append(commands, help) {
		if !strings.Contains(usageOut, "\n  "+c.name+" ") {
			t.Errorf("usage does not list %s:\n%s", c.name, usageOut)
		}
		code, out, _ := run("help", c.name)
		if code != ExitOK || !strings.Contains(out, "sluice "+c.name) {
			t.Errorf("help %s: exit %d:\n%s", c.name, code, out)
		}
	}
}

// TestSimErrorsPrintable: a key or value in a scenario file reaches the
// terminal in an error message; its control characters do not.
func TestSimErrorsPrintable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "esc.yaml")
	// YAML's escapes put ESC and RIGHT-TO-LEFT OVERRIDE into the key.
	src := `duration: 10s` + "\n" + `"\e[2Jkey\u202e": 1` + "\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run("sim", path)
	if code != ExitUsage || !strings.Contains(errs, `\x1b[2Jkey\u202e: unknown key`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if strings.ContainsAny(errs, "\x1b\u202e") {
		t.Errorf("stderr holds raw control characters: %q", errs)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain: ok\nnext": "plain: ok\nnext",
		"a\x1bb\tc":       `a\x1bb\tc`,
		"bidi\u202ex":     `bidi\u202ex`,
		"bad\xffutf8 é":   `bad\xffutf8 é`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}
