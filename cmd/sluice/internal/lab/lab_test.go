package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
	"github.com/sluicehq/sluice/sim"
)

// writeScenario writes src to a scenario file in a new directory.
func writeScenario(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanPlacesFlagErrors: a flag that makes a valid file invalid is
// named, and the problem is placed at the field's line, as sluice sim
// says it ("-duration: FILE:3: warmup: ...").
func TestPlanPlacesFlagErrors(t *testing.T) {
	path := writeScenario(t, "w.yaml", `name: w
duration: 10s
warmup: 1s
interval: 100ms
origin: {workers: 2, service: {kind: constant, mean: 10ms}}
load: {rate: 10}
policies: [{kind: none}]
`)
	_, err := Plan([]Experiment{FromFile(path)}, PlanOptions{Duration: 500 * time.Millisecond})
	var se *scenario.Error
	if !errors.As(err, &se) || se.Line != 3 || se.Field != "warmup" {
		t.Fatalf("err = %v, want a scenario error at line 3, warmup", err)
	}
	if want := "-duration: " + path + ":3: warmup: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want it to start with %q", err, want)
	}
	if !errors.Is(err, scenario.ErrInvalid) {
		t.Errorf("err = %v does not match scenario.ErrInvalid", err)
	}
}

// TestPlanChecksSockets: what the simulator runs but sockets cannot (the
// origin's 100,000 goroutines, the load generator's 1e6 rps) is refused
// before anything runs, at the field's line; -sim-only still plans it.
func TestPlanChecksSockets(t *testing.T) {
	for _, tc := range []struct {
		src, field string
		line       int
		want       string
	}{
		{"name: w\nduration: 1s\norigin:\n  workers: 200000\n  service: {kind: constant, mean: 10ms}\nload: {rate: 10}\npolicies: [{kind: none}]\n",
			"origin.workers", 4, "on sockets, must be at most 100000, got 200000"},
		{"name: r\nduration: 1s\norigin: {workers: 2, service: {kind: constant, mean: 10ms}}\nload:\n  rate: 10\n  steps: [{at: 500ms, rate: 2000000}]\npolicies: [{kind: none}]\n",
			"load.steps[0].rate", 6, "on sockets, must be in [0, 1e+06], got 2e+06"},
	} {
		path := writeScenario(t, "s.yaml", tc.src)
		_, err := Plan([]Experiment{FromFile(path)}, PlanOptions{})
		var se *scenario.Error
		if !errors.As(err, &se) || se.Field != tc.field || se.Line != tc.line || !strings.Contains(se.Msg, tc.want) {
			t.Errorf("%s: err = %v, want %s:%d: %s: %s", tc.field, err, path, tc.line, tc.field, tc.want)
		}
		if _, err := Plan([]Experiment{FromFile(path)}, PlanOptions{SimOnly: true}); err != nil {
			t.Errorf("%s: the simulator alone: %v", tc.field, err)
		}
	}
}

// quickScenario is a second of one worker at 10 ms and 10 rps, unlimited.
func quickScenario() sim.Scenario {
	return sim.Scenario{
		Name: "quick", Duration: time.Second,
		Origin:   sim.Origin{Workers: 1, Service: sim.Dist{Kind: sim.Constant, Mean: 10 * time.Millisecond}},
		Load:     sim.Load{Rate: 10},
		Policies: []sim.Policy{sim.NonePolicy{}},
	}
}

// TestRunErrNamesFailedExperiment: an experiment whose real run failed is
// recorded and the others run, and the result's Err names it, so that the
// command fails (exit 1) instead of reporting a lab that ran.
func TestRunErrNamesFailedExperiment(t *testing.T) {
	s := quickScenario()
	plan := []Planned{{Experiment: Experiment{Name: "a"}, Scenario: s}, {Experiment: Experiment{Name: "b"}, Scenario: s}}
	calls := 0
	real := func(context.Context, sim.Scenario, time.Duration, bool) (*report.Report, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("the origin would not start")
		}
		return &report.Report{}, nil
	}
	res, err := Run(context.Background(), plan, Options{Real: real})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Experiments) != 2 {
		t.Fatalf("%d experiments recorded, want 2", len(res.Experiments))
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "a: real run: the origin would not start") {
		t.Errorf("Err() = %v, want experiment a's failure", err)
	}
}
