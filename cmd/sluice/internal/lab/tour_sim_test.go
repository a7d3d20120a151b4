package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestTourSimOnly plans the whole tour from the repository's files and runs
// it in the simulator: every file parses, every named policy exists, and the
// simulator holds the seeds' claims on its own.
func TestTourSimOnly(t *testing.T) {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(InRoot(Tour(), root), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), plan, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res.Experiments {
		if x.Error != "" {
			t.Errorf("%s: %s", x.Name, x.Error)
		}
		for _, c := range x.Checks {
			if !c.Held {
				t.Errorf("%s: %s: want %s, got %s", x.Name, c.Name, c.Want, c.Got)
			}
		}
	}
	if dir := os.Getenv("LAB_REPORT_DIR"); dir != "" {
		p, err := WriteFiles(dir, res)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(filepath.Abs(p))
	}
}
