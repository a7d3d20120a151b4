package lab

import (
	"context"
	"os"
	"strconv"
	"testing"
)

// runTour plans the named tour experiments (at scale k, 0 for their own)
// and runs them on sockets and in the simulator.
func runTour(t *testing.T, k float64, names ...string) *Result {
	t.Helper()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	var exps []Experiment
	for _, e := range Tour() {
		for _, n := range names {
			if e.Name == n {
				exps = append(exps, e)
			}
		}
	}
	plan, err := Plan(InRoot(exps, root), k)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), plan, Options{Real: RunReal})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res.Experiments {
		if x.Error != "" {
			t.Fatalf("%s: %s", x.Name, x.Error)
		}
		for _, a := range x.Agreement {
			t.Logf("%s %-20s real %6.1f%%  sim %6.1f%%  %+.1f pp", x.Name, a.Policy, a.RealPct, a.SimPct, a.DiffPP)
		}
		for _, c := range x.Checks {
			t.Logf("%s %v: %s: want %s, got %s", x.Name, c.Held, c.Name, c.Want, c.Got)
		}
	}
	return res
}

func TestLabAdhoc(t *testing.T) {
	name := os.Getenv("LAB_EXP")
	if name == "" {
		t.Skip("LAB_EXP names a tour experiment to run by hand")
	}
	k, _ := strconv.ParseFloat(os.Getenv("LAB_SCALE"), 64)
	res := runTour(t, k, name)
	if dir := os.Getenv("LAB_REPORT_DIR"); dir != "" {
		if _, err := WriteFiles(dir, res); err != nil {
			t.Fatal(err)
		}
	}
}
