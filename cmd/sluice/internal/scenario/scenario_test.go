package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// good is a valid file; the bad cases below are edits of it, so that each
// shows exactly one problem.
const good = `# a comment
name: demo
seed: 42
duration: 30s
interval: 500ms
origin:
  workers: 7
  queue: 100
  service: {kind: constant, mean: 1s}
  changes:
    - at: 10s
      service: {kind: constant, mean: 2s}
load:
  arrivals: poisson
  rate: 5
  timeout: 2.5s
  client_workers: 10
policies:
  - name: static-5
    kind: concurrency
    limit: 5
  - kind: adaptive
    algorithm: aimd
report:
  within: 1s
`

func TestParseGood(t *testing.T) {
	f, err := Parse("demo.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Scenario{
		Name: "demo", Seed: 42, Duration: 30 * time.Second, Interval: 500 * time.Millisecond,
		Origin: sim.Origin{
			Workers: 7, Queue: 100, Service: sim.Dist{Kind: sim.Constant, Mean: time.Second},
			Changes: []sim.Change{{At: 10 * time.Second, Service: sim.Dist{Kind: sim.Constant, Mean: 2 * time.Second}}},
		},
		Load: sim.Load{Arrivals: sim.PoissonArrivals, Rate: 5, Timeout: 2500 * time.Millisecond, ClientWorkers: 10},
		Policies: []sim.Policy{
			sim.ConcurrencyPolicy{Name: "static-5", Limit: 5},
			sim.AdaptivePolicy{Algorithm: sim.AIMD},
		},
	}
	if !reflect.DeepEqual(f.Scenario, want) {
		t.Errorf("got  %+v\nwant %+v", f.Scenario, want)
	}
	if f.Report.Within != time.Second || f.Path != "demo.yaml" {
		t.Errorf("report %+v, path %q", f.Report, f.Path)
	}
}

func TestParseDefaultName(t *testing.T) {
	f, err := Parse("dir/my-run.yaml", []byte(strings.Replace(good, "name: demo\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "my-run" {
		t.Errorf("name = %q, want the file's base name my-run", f.Name)
	}
}

func TestParseAlias(t *testing.T) {
	src := strings.Replace(good, "  service: {kind: constant, mean: 1s}", "  service: &fast {kind: constant, mean: 1s}", 1)
	src = strings.Replace(src, "      service: {kind: constant, mean: 2s}", "      service: *fast", 1)
	f, err := Parse("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Origin.Changes[0].Service.Mean; got != time.Second {
		t.Errorf("alias: mean = %v, want 1s", got)
	}
}

func TestParseMergeKeys(t *testing.T) {
	src := `duration: 10s
origin: {workers: 2, service: {kind: constant, mean: 1s}}
load: {rate: 1}
policies:
  - &limit50 {name: a, kind: concurrency, limit: 50, queue: 10}
  - {<<: *limit50, name: b, queue: 20}
`
	f, err := Parse("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.Policy{
		sim.ConcurrencyPolicy{Name: "a", Limit: 50, QueueConfig: sim.QueueConfig{Queue: 10}},
		sim.ConcurrencyPolicy{Name: "b", Limit: 50, QueueConfig: sim.QueueConfig{Queue: 20}}, // explicit keys win
	}
	if !reflect.DeepEqual(f.Policies, want) {
		t.Errorf("got  %+v\nwant %+v", f.Policies, want)
	}

	bad := strings.Replace(src, "<<: *limit50", "<<: 5", 1)
	_, err = Parse("m.yaml", []byte(bad))
	if err == nil || !strings.HasPrefix(err.Error(), "m.yaml:6: policies[1].<<: a merge key takes a mapping") {
		t.Errorf("bad merge: %v", err)
	}
	bad = strings.Replace(src, "queue: 10}", "queue: 10, qeue: 1}", 1)
	_, err = Parse("m.yaml", []byte(bad))
	if err == nil || !strings.HasPrefix(err.Error(), "m.yaml:5: policies[0].qeue: unknown key") {
		t.Errorf("unknown key in an anchor: %v", err)
	}
}

// TestParseBad: every invalid file is an error that names the file, the line
// and the field, matches ErrInvalid, and returns no scenario (nothing runs).
func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string // edit of good
		want     string // the error starts with this
	}{
		{"unknown top-level key", "seed: 42\n", "seed: 42\nsed: 1\n", "bad.yaml:4: sed: unknown key"},
		{"unknown nested key", "  queue: 100\n", "  queue: 100\n  qeue: 3\n", "bad.yaml:9: origin.qeue: unknown key"},
		{"unknown key in a list", "    limit: 5\n", "    limit: 5\n    limt: 6\n", "bad.yaml:22: policies[0].limt: unknown key"},
		{"key twice", "seed: 42\n", "seed: 42\nseed: 43\n", "bad.yaml:4: seed: key given twice"},
		{"duration without unit", "duration: 30s", "duration: 30", `bad.yaml:4: duration: "30" has no unit`},
		{"not a duration", "timeout: 2.5s", "timeout: soon", `bad.yaml:16: load.timeout: "soon" is not a duration`},
		{"not a number", "rate: 5", "rate: five", `bad.yaml:15: load.rate: "five" is not a number`},
		{"not an integer", "workers: 7", "workers: 7.5", `bad.yaml:7: origin.workers: "7.5" is not a whole number`},
		{"negative seed", "seed: 42", "seed: -1", `bad.yaml:3: seed: "-1" is not a whole number >= 0`},
		{"list where a mapping goes", "  service: {kind: constant, mean: 1s}", "  service: [1s]", "bad.yaml:9: origin.service: want a mapping"},
		{"mapping where a list goes", "  changes:\n    - at: 10s\n      service: {kind: constant, mean: 2s}\n", "  changes: {at: 10s}\n", "bad.yaml:10: origin.changes: want a list"},
		{"mapping where a value goes", "rate: 5", "rate: {x: 1}", "bad.yaml:15: load.rate: want a single value"},
		{"unknown discipline", "    limit: 5\n", "    limit: 5\n    queue: 10\n    discipline: stack\n", `bad.yaml:23: policies[0].discipline: `},
		{"discipline by name", "    limit: 5\n", "    limit: 5\n    discipline: lifo\n    queue: -2\n", `bad.yaml:23: policies[0].queue: must be >= 0, or -1`},
		{"bool", "  client_workers: 10\n", "  client_workers: 10\n  ramp: yes\n", `bad.yaml:18: load.ramp: "yes" is not true or false`},
		// Problems sim.Scenario.Validate finds get the line of their field.
		{"mean must be > 0", "mean: 1s}", "mean: 0s}", "bad.yaml:9: origin.service.mean: must be > 0"},
		{"negative workers", "workers: 7", "workers: -7", "bad.yaml:7: origin.workers: must be > 0"},
		{"unknown policy kind", "kind: adaptive", "kind: magic", `bad.yaml:22: policies[1].kind: unknown policy "magic"`},
		{"unknown distribution", "{kind: constant, mean: 2s}", "{kind: gaussian, mean: 2s}", `bad.yaml:12: origin.changes[0].service.kind: unknown distribution "gaussian"`},
		{"required field left out", "    limit: 5\n", "", "bad.yaml:19: policies[0].limit: must be > 0 for a concurrency policy, got 0 (not set in the file)"},
		{"required top-level field left out", "duration: 30s\n", "", "bad.yaml:1: duration: must be > 0, got 0s (not set in the file)"},
		{"field of the wrong kind", "    algorithm: aimd\n", "    algorithm: aimd\n    rate: 10\n", "bad.yaml:24: policies[1].rate: unknown key (known here: aimd, algorithm, codel_interval, codel_target, discipline, gradient2, kind, limit, little, max_limit, max_wait, max_wait_services, min_limit, name, queue, vegas)"},
		{"policy without a kind", "kind: adaptive", "name: kindless", `bad.yaml:22: policies[1].kind: is required (none, concurrency, adaptive, token-bucket, ticker)`},
		{"kind from a merge key", "report:\n", "  - {<<: {kind: token-bucket}, rate: 5, limit: 3}\nreport:\n", "bad.yaml:24: policies[2].limit: unknown key (known here: burst, kind, max_wait, name, rate)"},
		{"change after the end", "    - at: 10s\n", "    - at: 45s\n", "bad.yaml:11: origin.changes[0].at: must be before the end of the run (duration 30s), got 45s"},
		{"change at the end", "    - at: 10s\n", "    - at: 30s\n", "bad.yaml:11: origin.changes[0].at: must be before the end of the run (duration 30s), got 30s"},
		{"report.within negative", "within: 1s", "within: -1s", "bad.yaml:25: report.within: must be >= 0"},
		{"two policies, one name", "    algorithm: aimd\n", "    algorithm: aimd\n  - kind: none\n  - kind: none\n", `bad.yaml:25: policies[3].name: "none" already names policies[2]: give each policy its own name (not set in the file)`},
		// Runs too large to simulate are refused before they start.
		{"too many points", "interval: 500ms", "interval: 100us", "bad.yaml:5: interval: duration 30s / interval 100µs is 300000 points per policy, more than the 100000"},
		{"too long for the default interval", "duration: 30s\ninterval: 500ms\n", "duration: 1000h\n", "bad.yaml:4: duration: duration 1000h0m0s / interval 1s is 3600000 points per policy, more than the 100000"},
		{"too many requests", "rate: 5", "rate: 1e6", "bad.yaml:4: duration: 30s at up to 1e+06 requests per second (with bursts and retries) is up to 3e+07 requests per policy, more than the 10000000"},
		{"too many retries", "  client_workers: 10\n", "  client_workers: 10\n  steps: [{at: 1s, rate: 1e5}]\n  retries: {max: 3}\n", "bad.yaml:4: duration: 30s at up to 100000 requests per second (with bursts and retries) is up to 1.2e+07 requests"},
		// Whole-file problems.
		{"syntax", "seed: 42\n", "seed: 42\n  oops: [\n", "bad.yaml:4: YAML syntax"},
		{"tab indentation", "  workers: 7\n", "\tworkers: 7\n", "bad.yaml:7: YAML syntax"},
		{"two documents", "report:\n", "---\nname: other\n---\nreport:\n", "bad.yaml:24: more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("bad test: %q is not in the good file", tc.old)
			}
			src := strings.Replace(good, tc.old, tc.new, 1)
			f, err := Parse("bad.yaml", []byte(src))
			if err == nil {
				t.Fatalf("no error; parsed %+v", f.Scenario)
			}
			if f != nil {
				t.Errorf("a scenario came back with the error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n %v\nwant prefix:\n %s", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "bad.yaml" || e.Line <= 0 {
				t.Errorf("%v: not an *Error with file and line: %+v", err, e)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n"} {
		_, err := Parse("empty.yaml", []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), "empty.yaml:1: empty scenario file") {
			t.Errorf("Parse(%q) = %v", src, err)
		}
	}
	_, err := Parse("list.yaml", []byte("- 1\n- 2\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "list.yaml:1: want a mapping of keys, got a list") {
		t.Errorf("top-level list: %v", err)
	}
}

// TestParseManyErrors: several problems are reported at once, each on its
// own line, so one edit-run cycle fixes them all.
func TestParseManyErrors(t *testing.T) {
	src := strings.NewReplacer("seed: 42", "seed: x", "workers: 7", "workers: y", "rate: 5", "rat: 5").Replace(good)
	_, err := Parse("m.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"m.yaml:3: seed:", "m.yaml:7: origin.workers:", "m.yaml:15: load.rat: unknown key"}
	if len(lines) != len(want) {
		t.Fatalf("want %d errors, got:\n%v", len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	_, err := Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("missing file: %v", err)
	}
}

// TestLoadTooLarge: a path to something that is not a page of YAML (a huge
// file, /dev/zero) is refused after a bounded read.
func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(good+strings.Repeat("#\n", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), path+":1: larger than 1048576 bytes") {
		t.Errorf("Load(big) = %v", err)
	}
}

// FuzzParse: no file makes Parse panic; every rejection is an *Error with a
// line, and every file it accepts is one the simulator accepts (within the
// size a run may have).
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("duration: 10s\norigin: {workers: 2, service: {kind: constant, mean: 1s}}\nload: {rate: 1}\npolicies:\n  - &p {name: a, kind: concurrency, limit: 5}\n  - {<<: [*p, *p], name: b}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("duration: 10s\norigin: &o {<<: *o, n: 1}\nload: {rate: 1}\npolicies: [{kind: none}]\n"))
	f.Add([]byte("- 1\n---\n- 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Line < 1 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not an *Error with a line", err)
			}
			return
		}
		if err := file.Scenario.Validate(); err != nil {
			t.Fatalf("accepted a scenario the simulator refuses (too large, say): %v", err)
		}
	})
}

// TestSizeCountsBurstsInTheRun: only bursts sent before the end count
// towards the size bound.
func TestSizeCountsBurstsInTheRun(t *testing.T) {
	for _, tc := range []struct {
		bursts string
		ok     bool
	}{
		{"{size: 100000000, count: 1, at: 30s}", true},              // at the end: never sent
		{"{size: 4000000, count: 1000, every: 10s, at: 15s}", true}, // 2 of them in the run
		{"{size: 4000000, count: 1000, every: 10s, at: 0s}", false}, // 3 of them
		{"{size: 100000000, count: 1, at: 29s}", false},             // one, too large
	} {
		src := strings.Replace(good, "  rate: 5\n", "  rate: 5\n  bursts: "+tc.bursts+"\n", 1)
		_, err := Parse("b.yaml", []byte(src))
		if (err == nil) != tc.ok {
			t.Errorf("bursts %s: %v, want ok %v", tc.bursts, err, tc.ok)
		}
	}
}

// TestParseAliasBomb: merge keys and aliases that name one large mapping
// many times are refused at a bounded cost, not expanded until memory runs
// out (this 600 kB file used to need tens of GB).
func TestParseAliasBomb(t *testing.T) {
	var keys, aliases []string
	for i := range 40000 {
		keys = append(keys, fmt.Sprintf("k%d: 1", i))
		aliases = append(aliases, "*a")
	}
	bombs := map[string]string{
		"merge":  "x: &a {" + strings.Join(keys, ", ") + "}\norigin: {<<: [" + strings.Join(aliases, ", ") + "]}\n",
		"alias":  "x: &a {" + strings.Join(keys, ", ") + "}\npolicies: [" + strings.Join(aliases, ", ") + "]\n",
		"a list": "load: {steps: [" + strings.Repeat("{}, ", 300000) + "{}]}\n",
	}
	for name, src := range bombs {
		_, err := Parse("bomb.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "once aliases and merge keys are expanded") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// policies returns n policy entries named from first on, for edits of good.
func policies(first, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: p%d, kind: none}\n", first+i)
	}
	return b.String()
}

// TestSizeOfTheWholeRun: every policy runs the whole scenario, so many
// policies on a run within the per-policy bounds are refused too.
func TestSizeOfTheWholeRun(t *testing.T) {
	src := strings.Replace(good, "interval: 500ms", "interval: 1ms", 1) // 30000 points per policy
	if _, err := Parse("w.yaml", []byte(src)); err != nil {
		t.Fatalf("2 policies: %v", err)
	}
	src = strings.Replace(src, "report:\n", policies(2, 40)+"report:\n", 1)
	_, err := Parse("w.yaml", []byte(src))
	const want = "w.yaml:18: policies: 42 policies of 30000 points and up to 150 requests each are more than the 1000000 points"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("42 policies: %v\nwant prefix %s", err, want)
	}
}

// TestParseNoEnv: a scenario is data: ${NAME} in a value is kept as
// written, not read from the environment (the proxy's config does that).
func TestParseNoEnv(t *testing.T) {
	t.Setenv("SCENARIO_TEST_NAME", "from-env")
	f, err := Parse("env.yaml", []byte(strings.Replace(good, "name: demo", "name: ${SCENARIO_TEST_NAME}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "${SCENARIO_TEST_NAME}" {
		t.Errorf("name = %q, want ${SCENARIO_TEST_NAME} as written", f.Name)
	}
}
