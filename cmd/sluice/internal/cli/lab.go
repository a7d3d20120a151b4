package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/lab"
	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
)

// signalContext is the lab's context: cancelled by Ctrl-C or SIGTERM, so
// that the lab closes its servers and ports before it exits.
var signalContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runLab(e env, fs *flag.FlagSet, args []string) int {
	if len(args) > 0 && args[0] == "capacity" {
		return runCapacity(e, args[1:])
	}
	timeScale := fs.Float64("timescale", 0, "multiply every duration and divide every rate by `K` in (0, 1] (0: the tour's own per experiment, 1 for files)")
	out := fs.String("out", "", "write lab.html and lab.json into `DIR` (default: a new directory under $TMPDIR)")
	simOnly := fs.Bool("sim-only", false, "run the simulator only, no sockets")
	asJSON := fs.Bool("json", false, "print the results as JSON instead of the summary")
	only := fs.String("policies", "", "run only the policies of these comma-separated `names`")
	duration := fs.Duration("duration", 0, "replace each scenario's `duration`, in the file's time (0: keep it)")
	files, code, ok := parse(fs, args, -1)
	if !ok {
		return code
	}
	if !(*timeScale >= 0 && *timeScale <= 1) { // written so that NaN fails it
		return usageError(fs, "-timescale", fmt.Errorf("must be in (0, 1], or 0 for the experiments' own, got %v", *timeScale))
	}
	var exps []lab.Experiment
	if len(files) == 0 {
		wd, _ := os.Getwd()
		root, err := lab.FindRoot(wd)
		if err != nil {
			fmt.Fprintf(e.stderr, "sluice lab: %v\n", err)
			return ExitUsage
		}
		exps = lab.InRoot(lab.Tour(), root)
	} else {
		for _, f := range files {
			// lab.Plan reads the files; the names that are not files are
			// worded as every command words them.
			if err := checkScenarioPath(f); err != nil {
				return badScenario(e, "lab", err)
			}
			exps = append(exps, lab.FromFile(f))
		}
	}
	// Every file is read and checked before anything runs.
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	plan, err := lab.Plan(exps, lab.PlanOptions{TimeScale: *timeScale, Only: names, Duration: *duration, SimOnly: *simOnly})
	if err != nil {
		// A file that cannot be read is bad input, like one that does not
		// parse: exit 2 either way, and nothing ran.
		fmt.Fprintf(e.stderr, "sluice lab: %s\n", escape(err.Error()))
		return ExitUsage
	}
	// A new directory per run by default: a fixed name under a shared
	// /tmp may already be someone else's file or link.
	if *out == "" {
		dir, err := os.MkdirTemp("", "sluice-lab-")
		if err != nil {
			return usageError(fs, "-out", err)
		}
		*out = dir
	} else if err := os.MkdirAll(*out, 0o755); err != nil {
		return usageError(fs, "-out", err)
	}
	if err := lab.CheckFiles(*out); err != nil {
		return usageError(fs, "-out", err)
	}
	ctx, stop := signalContext()
	defer stop()
	opts := lab.Options{Progress: e.stderr}
	if !*simOnly {
		opts.Real = lab.RunReal
	}
	res, runErr := lab.Run(ctx, plan, opts)
	if *asJSON {
		err = lab.WriteJSON(e.stdout, res)
	} else {
		err = lab.WriteText(e.stdout, res)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice lab: %v\n", err)
		return ExitFail
	}
	path, err := lab.WriteFiles(*out, res)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice lab: writing the report: %v\n", err)
		return ExitFail
	}
	// The report's path ends the output; with -json it goes to stderr, so
	// that stdout stays one JSON document.
	where := e.stdout
	if *asJSON {
		where = e.stderr
	}
	if runErr != nil {
		fmt.Fprintf(e.stderr, "sluice lab: stopped: %v; the report has what ran\n", runErr)
		fmt.Fprintf(where, "report: %s\n", path)
		return ExitFail
	}
	if err := res.Err(); err != nil {
		// An experiment that could not run is a failed lab, as a stop is.
		fmt.Fprintf(e.stderr, "sluice lab: %s\n", escape(err.Error()))
		fmt.Fprintf(where, "report: %s\n", path)
		return ExitFail
	}
	fmt.Fprintf(where, "report: %s\n", path)
	return ExitOK
}

// minPrecision is the finest -precision: each halving of the gap costs a
// -step (5 s by default), and a rate measured over seconds is not known to
// better than a tenth of a percent anyway. From the first failing step,
// where the gap is at most a factor of 2, it takes about 10 steps.
const minPrecision = 0.001

// maxStep is the longest -step: the load generator's series holds at most
// load.MaxIntervals points of its default interval.
const maxStep = load.MaxIntervals * load.DefaultInterval

// runCapacity is "sluice lab capacity URL --slo ...": seed 000's method,
// automated.
func runCapacity(e env, args []string) int {
	fs := newFlagSet(e, command{name: "lab capacity", args: "[flags] URL",
		summary: "find the highest rate URL serves within an SLO, and the limits that keep it there"})
	sloFlag := fs.String("slo", "p95<=275ms,success>=99.99%", "the objective: a latency `percentile bound` and a success share")
	start := fs.Float64("start", 10, "first step's rate, requests per second")
	maxRate := fs.Float64("max", 20000, "highest rate to try, requests per second")
	step := fs.Duration("step", 5*time.Second, "how long each step lasts")
	timeout := fs.Duration("timeout", 0, "client timeout (0: twice the SLO's latency)")
	precision := fs.Float64("precision", 0.02, "stop when the rate is known to this relative precision, in [0.001, 1)")
	asJSON := fs.Bool("json", false, "print the recommendation as JSON")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	slo, err := lab.ParseSLO(*sloFlag)
	if err != nil {
		return usageError(fs, "-slo", err)
	}
	// Each check is written !(in range) so that NaN, which fails every
	// comparison, fails it. A rate above what load sends would fail only
	// when the search reached it, minutes of steps later.
	switch {
	case !(*start > 0 && *start <= load.MaxRate):
		return usageError(fs, "-start", fmt.Errorf("must be in (0, %g], got %v", load.MaxRate, *start))
	case !(*maxRate >= *start && *maxRate <= load.MaxRate):
		return usageError(fs, "-max", fmt.Errorf("must be in [-start (%v), %g], got %v", *start, load.MaxRate, *maxRate))
	case *step <= 0 || *step > maxStep:
		return usageError(fs, "-step", fmt.Errorf("must be in (0, %v], got %v", maxStep, *step))
	case *timeout < 0:
		return usageError(fs, "-timeout", fmt.Errorf("must be >= 0, got %v", *timeout))
	case !(*precision >= minPrecision && *precision < 1):
		return usageError(fs, "-precision", fmt.Errorf("must be in [%v, 1), got %v", minPrecision, *precision))
	}
	url := pos[0]
	first := lab.StepLoad(url, slo, *start, *step, *timeout) // the first step, as lab.StepMeasure sends it
	// A step measures after its warm-up (its first fifth), and a first
	// step with nothing to measure failed the SLO: "no rate met it".
	// Constant arrivals come at k/rate from 0: 1.25/rate holds one.
	if warm := math.Ceil(first.Warmup.Seconds() * *start); warm >= step.Seconds()**start {
		least := time.Duration(math.Ceil(1.25 / *start * 1000)) * time.Millisecond
		return usageError(fs, "-step", fmt.Errorf("a step of %v at -start %v rps measures no request (its first fifth is warm-up): want at least %v", *step, *start, least))
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return usageError(fs, "URL", fmt.Errorf("want http:// or https://, got %q", url))
	}
	// What the load generator would refuse at the first step, once the
	// service had been probed (a URL without a host).
	if err := first.Validate(); err != nil {
		return usageError(fs, "URL", err)
	}
	ctx, stop := signalContext()
	defer stop()
	measure := lab.StepMeasure(url, slo, *step, *timeout, 0, e.stderr)
	steps, best, err := lab.Search{Start: *start, Max: *maxRate, Precision: *precision}.Find(ctx, slo, measure)
	if err != nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	if err != nil && best.RateRPS == 0 {
		fmt.Fprintf(e.stderr, "sluice lab capacity: %v\n", err)
		return ExitFail
	}
	rec := lab.Recommend(slo, steps, best)
	if err != nil {
		// A rate that met the SLO is a lower bound worth having: the
		// steps that found it may have taken minutes.
		rec.Unfinished, rec.Unbounded = err.Error(), false
	}
	var werr error
	if *asJSON {
		werr = lab.WriteRecommendationJSON(e.stdout, rec)
	} else {
		werr = lab.WriteRecommendation(e.stdout, rec)
	}
	if werr != nil {
		fmt.Fprintf(e.stderr, "sluice lab capacity: %v\n", werr)
		return ExitFail
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice lab capacity: %v\n", err)
		return ExitFail
	}
	return ExitOK
}
