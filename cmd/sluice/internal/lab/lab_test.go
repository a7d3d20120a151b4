package lab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
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
