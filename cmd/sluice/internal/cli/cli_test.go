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
		{[]string{"sim", slow, "--duration", "-1s"}, "-duration: must be >= 0"},
		{[]string{"sim", slow, "--duration", "20s"}, "-duration: " + slow + ":7: warmup: must be in [0, duration)"},
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
	// flight at 2 s per request serve 2.5 rps of the 3.5 the origin can.
	none, static := r.Policies[0].Summary, r.Policies[1].Summary
	if none.GoodputRPS > 0.1 || none.Timeouts == 0 {
		t.Errorf("none: goodput %v, timeouts %d; the seed has every request time out", none.GoodputRPS, none.Timeouts)
	}
	if static.GoodputRPS < 2.3 || static.GoodputRPS > 2.55 {
		t.Errorf("static-5: goodput %v, want about 2.5 (seed: 2.3)", static.GoodputRPS)
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

func TestSimMissingFile(t *testing.T) {
	code, out, errs := run("sim", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != ExitFail || out != "" || !strings.Contains(errs, "nope.yaml") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
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
