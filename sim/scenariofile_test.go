package sim_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/scenario"
	"github.com/sluicehq/sluice/sim"
)

// The acceptance tests and scenarios/seed003-slowdown.yaml must describe
// the same experiment: a figure quoted from `sluice sim` on the file is then
// the test's figure. The file may list more policies; the test's adaptive
// policy must be among them, field for field.
func TestSeed003FileMatchesAcceptance(t *testing.T) {
	f, err := scenario.Load(filepath.Join("..", "scenarios", "seed003-slowdown.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Seed003(sim.Seed003Adaptive)
	got := f.Scenario
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"seed", got.Seed, want.Seed},
		{"duration", got.Duration, want.Duration},
		{"origin", got.Origin, want.Origin},
		{"load", got.Load, want.Load},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: file has %+v, acceptance test %+v", c.field, c.got, c.want)
		}
	}
	found := false
	for _, p := range got.Policies {
		if p.Name == sim.Seed003Adaptive.Name {
			found = true
			if !reflect.DeepEqual(p, sim.Seed003Adaptive) {
				t.Errorf("policy %q: file has %+v, acceptance test %+v", p.Name, p, sim.Seed003Adaptive)
			}
		}
	}
	if !found {
		t.Errorf("no policy named %q in the file", sim.Seed003Adaptive.Name)
	}
}
