package scenario

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScenarioFiles: every file in scenarios/ parses, validates and runs
// (cut to a short run), so that a change to the simulator's types or checks
// that breaks a checked-in scenario fails here, not in someone's terminal.
func TestScenarioFiles(t *testing.T) {
	paths, err := filepath.Glob("../../../../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	for _, seed := range []string{"seed000-ramp.yaml", "seed001-bursts.yaml", "seed003-slowdown.yaml"} {
		if !slices.Contains(names, seed) {
			t.Errorf("scenarios/%s is missing", seed)
		}
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); f.Name != want {
				t.Errorf("name %q, want the file's name %q", f.Name, want)
			}
			const short = 30 * time.Second
			if f.Duration > short {
				f.Duration = short
				f.Warmup = min(f.Warmup, short/2)
				f.Interval = min(f.Interval, short)
			}
			res, err := f.Run()
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Policies) != len(f.Policies) {
				t.Fatalf("%d results for %d policies", len(res.Policies), len(f.Policies))
			}
			for _, p := range res.Policies {
				if p.Summary.Sent == 0 || len(p.Series) == 0 {
					t.Errorf("%s: sent %d, %d points: nothing ran", p.Name, p.Summary.Sent, len(p.Series))
				}
				// The achievable is the most any policy could serve: a
				// policy above it says the figure is wrong (seed 002's
				// bounded executor once read far above it). 2% for the
				// service times' noise around the capacity's mean.
				if s := p.Summary; s.Goodput > 1.02*s.Achievable {
					t.Errorf("%s: goodput %.2f rps above the achievable %.2f", p.Name, s.Goodput, s.Achievable)
				}
			}
		})
	}
}
