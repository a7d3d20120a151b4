package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
	"github.com/sluicehq/sluice/sim"
)

// RealFunc runs a scenario's policies on real sockets and reports them in
// the simulator's model; within is the file's report.within. RunReal is the
// lab's; tests may pass their own.
// With oneAtATime the policies run one after the other.
type RealFunc func(ctx context.Context, s sim.Scenario, within time.Duration, oneAtATime bool) (*report.Report, error)

// Options configures Run.
type Options struct {
	// Experiments to run, in order (Tour for the seeds').
	Experiments []Experiment
	// TimeScale, when > 0, replaces every experiment's own.
	TimeScale float64
	// Real runs the scenarios on sockets; nil runs the simulator only.
	Real RealFunc
	// Progress, if not nil, gets a line as each step starts.
	Progress io.Writer
}

// Planned is an experiment whose file has been read, checked, cut down to
// the chosen policies and scaled: ready to run.
type Planned struct {
	Experiment
	Scenario sim.Scenario
	Within   time.Duration

	file *scenario.File // holding Scenario, to place the simulator's errors at their line
}

// PlanOptions changes the experiments as Plan reads them.
type PlanOptions struct {
	// TimeScale, when > 0, replaces every experiment's own (Scale).
	TimeScale float64
	// Only, when not empty, keeps the policies of those names: an
	// experiment with none of them is left out, and a name no experiment
	// has is an error.
	Only []string
	// Duration, when > 0, replaces every scenario's duration, in the
	// file's time (before scaling): "3m" runs seed 003 to the end of its
	// slow phase.
	Duration time.Duration
	// SimOnly says the experiments will run in the simulator alone. By
	// default they will run on sockets too, and Plan also checks what
	// sockets can run (the origin's and the load generator's limits,
	// which the simulator does not have).
	SimOnly bool
}

// Plan reads and checks every experiment's file before anything runs, so
// that a typo in the last file costs nothing. Errors name the file, the
// line and the field (scenario.Error), after the flags that made the file
// invalid if any, and match scenario.ErrInvalid; a bad option matches
// ErrUsage.
func Plan(exps []Experiment, o PlanOptions) ([]Planned, error) {
	timeScale, only := o.TimeScale, o.Only
	if !(timeScale >= 0 && timeScale <= 1) { // NaN too
		return nil, fmt.Errorf("%w: -timescale: must be in (0, 1], got %v", ErrUsage, timeScale)
	}
	if o.Duration < 0 {
		return nil, fmt.Errorf("%w: -duration: must be >= 0, got %v", ErrUsage, o.Duration)
	}
	found := map[string]bool{}
	out := make([]Planned, 0, len(exps))
	for _, e := range exps {
		f, err := scenario.Load(e.File)
		if err != nil {
			return nil, err
		}
		s := f.Scenario
		switch {
		case o.Duration > 0:
			s.Duration = o.Duration
		case e.Duration > 0:
			s.Duration = e.Duration
		}
		if e.Policies != nil {
			var keep []sim.Policy
			for _, name := range e.Policies {
				p, ok := findPolicy(s.Policies, name)
				if !ok {
					return nil, fmt.Errorf("%s: policies: the lab's experiment %s wants a policy named %q; the file has %s",
						e.File, e.Name, name, policyNames(s.Policies))
				}
				keep = append(keep, p)
			}
			s.Policies = keep
		}
		s.Policies = append(s.Policies, e.Add...)
		if len(only) > 0 {
			var keep []sim.Policy
			for _, p := range s.Policies {
				if slices.Contains(only, p.Label()) {
					keep = append(keep, p)
					found[p.Label()] = true
				}
			}
			if len(keep) == 0 {
				continue
			}
			s.Policies = keep
		}
		k := e.TimeScale
		if timeScale > 0 {
			k = timeScale
		}
		if k == 0 {
			k = 1
		}
		e.TimeScale = k
		s = Scale(s, k)
		if e.LoadScale > 0 && e.LoadScale < 1 {
			s = ScaleLoad(s, e.LoadScale)
		}
		// Checked as the file it came from, so that a problem is placed at
		// its line, as sluice sim places it.
		f.Scenario = s
		if err := f.Validate(); err != nil {
			return nil, changedBy(e, o, err)
		}
		if !o.SimOnly {
			if field, problem, err := checkSockets(s); err != nil {
				if k != 1 {
					problem += fmt.Sprintf(" (at time scale %v)", k)
				}
				return nil, f.ErrorAt(field, "on sockets, "+problem+"; -sim-only runs the simulator alone", err)
			}
		}
		out = append(out, Planned{Experiment: e, Scenario: s, Within: time.Duration(float64(f.Report.Within) * k), file: f})
	}
	for _, name := range only {
		if !found[name] {
			return nil, fmt.Errorf("%w: -policies: no experiment has a policy named %q", ErrUsage, name)
		}
	}
	return out, nil
}

// changedBy says what made a valid file invalid: the flags, named first as
// sluice sim names them ("-duration: FILE:LINE: warmup: ..."), or else
// the lab's own time scale and duration for the experiment.
func changedBy(e Experiment, o PlanOptions, err error) error {
	var flags []string
	if o.Duration > 0 {
		flags = append(flags, "-duration")
	}
	if o.TimeScale > 0 && o.TimeScale != 1 {
		flags = append(flags, "-timescale")
	}
	if len(flags) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(flags, ", "), err)
	}
	return fmt.Errorf("%w (as the lab's experiment %s runs it, at time scale %v)", err, e.Name, e.TimeScale)
}

// ErrUsage marks a bad option (a flag value).
var ErrUsage = errors.New("bad usage")

func findPolicy(ps []sim.Policy, name string) (sim.Policy, bool) {
	for _, p := range ps {
		if p.Label() == name {
			return p, true
		}
	}
	return nil, false
}

func policyNames(ps []sim.Policy) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Label()
	}
	return strings.Join(names, ", ")
}

// Run runs each planned experiment in the simulator and, with opts.Real, on
// sockets, and checks the seeds' claims. An experiment that fails to run is
// recorded with its error and the others still run; a cancelled ctx stops
// the lab and returns ctx's error with what was done.
func Run(ctx context.Context, plan []Planned, opts Options) (*Result, error) {
	start := time.Now()
	res := &Result{Version: Version, Started: start.UTC().Format(time.RFC3339), CPU: cpuModel()}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	for _, p := range plan {
		// The simulator does not look at ctx: a stop between experiments
		// is the lab's to see, with or without sockets.
		if err := ctx.Err(); err != nil {
			res.ElapsedS = time.Since(start).Seconds()
			return res, err
		}
		x := ExperimentResult{Name: p.Name, Title: p.Title, File: p.File, Claim: p.Claim, TimeScale: p.TimeScale, Curves: p.Curves}
		fmt.Fprintf(progress, "lab: %s: simulating %s\n", p.Name, p.File)
		var simRes sim.Result
		var err error
		if p.file != nil {
			// A policy the simulator cannot build is placed at its line.
			f := *p.file
			f.Scenario = p.Scenario
			simRes, err = f.Run()
		} else {
			simRes, err = sim.Run(p.Scenario)
		}
		if err != nil {
			x.Error = "simulator: " + err.Error()
			res.Experiments = append(res.Experiments, x)
			continue
		}
		x.Sim = report.FromSim(p.Scenario, simRes, p.Within)
		x.Sim.File = p.File
		if opts.Real != nil {
			fmt.Fprintf(progress, "lab: %s: on sockets, %d policies for %v\n", p.Name, len(p.Scenario.Policies), p.Scenario.Duration)
			real, err := opts.Real(ctx, p.Scenario, p.Within, p.OneAtATime)
			if ctx.Err() != nil {
				res.Experiments = append(res.Experiments, x)
				res.ElapsedS = time.Since(start).Seconds()
				return res, ctx.Err()
			}
			if err != nil {
				x.Error = "real run: " + err.Error()
			} else {
				real.File = p.File
				x.Real = real
				x.Agreement = agree(x.Sim, x.Real)
			}
		}
		if p.checks != nil {
			x.Checks = p.checks(&x)
		}
		res.Experiments = append(res.Experiments, x)
	}
	res.ElapsedS = time.Since(start).Seconds()
	return res, nil
}

// cpuModel is the first "model name" of /proc/cpuinfo and the CPU count.
func cpuModel() string {
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs", model, runtime.NumCPU())
}

// FindRoot returns the repository root above dir: the first directory that
// holds scenarios/seed003-slowdown.yaml, where the tour's files are.
func FindRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "scenarios", "seed003-slowdown.yaml")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no scenarios/ directory with the seeds' files in %s or above: run the tour from the sluice repository, or name scenario files", dir)
		}
		d = parent
	}
}

// InRoot returns the tour with file names joined to root.
func InRoot(exps []Experiment, root string) []Experiment {
	out := append([]Experiment(nil), exps...)
	for i := range out {
		out[i].File = filepath.Join(root, out[i].File)
	}
	return out
}
