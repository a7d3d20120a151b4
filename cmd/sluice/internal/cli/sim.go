package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
)

func runSim(e env, fs *flag.FlagSet, args []string) int {
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	plotPath := fs.String("plot", "", "also draw goodput, latency and limit over time into `FILE` (.svg or .png)")
	seed := fs.Uint64("seed", 0, "override the scenario's random seed (0: keep the file's)")
	duration := fs.Duration("duration", 0, "override the scenario's simulated `duration` (0: keep the file's)")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	// Check everything before running anything: a typo in -plot must not
	// cost a long run.
	if *plotPath != "" {
		if _, err := report.PlotFormat(*plotPath); err != nil {
			return usageError(fs, "-plot", err)
		}
		if dir := filepath.Dir(*plotPath); !isDir(dir) {
			return usageError(fs, "-plot", fmt.Errorf("%q is not a directory", dir))
		}
	}
	if *duration < 0 {
		return usageError(fs, "-duration", fmt.Errorf("must be >= 0, got %v", *duration))
	}
	f, err := scenario.Load(pos[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice sim: %v\n", err)
		if errors.Is(err, scenario.ErrInvalid) {
			return ExitUsage
		}
		return ExitFail
	}
	if *seed != 0 {
		f.Seed = *seed
	}
	if *duration != 0 {
		f.Duration = *duration
		if err := f.Validate(); err != nil {
			// The new duration may clash with the file (warm-up, interval).
			return usageError(fs, "-duration", err)
		}
	}

	res, err := f.Run()
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice sim: %v\n", err)
		if errors.Is(err, scenario.ErrInvalid) {
			return ExitUsage
		}
		return ExitFail
	}
	r := report.FromSim(f.Scenario, res, f.Report.Within)
	r.File = f.Path
	if *asJSON {
		err = report.JSON(e.stdout, r)
	} else {
		err = report.Table(e.stdout, r)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice sim: writing the report: %v\n", err)
		return ExitFail
	}
	if *plotPath != "" {
		if err := report.PlotFile(*plotPath, r); err != nil {
			fmt.Fprintf(e.stderr, "sluice sim: plot: %v\n", err)
			return ExitFail
		}
		fmt.Fprintf(e.stderr, "sluice sim: wrote %s\n", *plotPath)
	}
	return ExitOK
}

// usageError reports a bad flag value, naming the flag, and returns
// ExitUsage.
func usageError(fs *flag.FlagSet, flagName string, err error) int {
	fmt.Fprintf(fs.Output(), "%s: %s: %v\n", fs.Name(), flagName, err)
	return ExitUsage
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
