package cli

import (
	"errors"
	"flag"
	"fmt"
	"github.com/sluicehq/sluice/cmd/sluice/internal/outfile"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
)

func runSim(e env, fs *flag.FlagSet, args []string) int {
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	plotPath := fs.String("plot", "", "also draw goodput, latency and limit over time into `FILE` (.svg or .png)")
	seed := fs.Uint64("seed", 0, "override the scenario's random seed (any value, 0 included)")
	duration := fs.Duration("duration", 0, "override the scenario's simulated `duration`")
	warmup := fs.Duration("warmup", 0, "override the scenario's warm-up: the `time` left out of the summary")
	interval := fs.Duration("interval", 0, "override the width of one point of the time series (`duration`)")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	// Which flags were given, so that an explicit 0 (-seed 0) overrides the
	// file like any other value.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// Check everything before running anything: a typo in -plot must not
	// cost a long run.
	var format string
	if *plotPath != "" {
		var err error
		if format, err = report.PlotFormat(*plotPath); err != nil {
			return usageError(fs, "-plot", err)
		}
		if dir := filepath.Dir(*plotPath); !isDir(dir) {
			return usageError(fs, "-plot", fmt.Errorf("%q is not a directory", dir))
		}
	}
	f, err := loadScenario(pos[0])
	if err != nil {
		return badScenario(e, "sim", err)
	}
	for _, o := range []struct {
		flag string
		dst  *time.Duration
		v    time.Duration
	}{{"duration", &f.Duration, *duration}, {"warmup", &f.Warmup, *warmup}, {"interval", &f.Interval, *interval}} {
		if set[o.flag] {
			*o.dst = o.v
		}
	}
	if set["seed"] {
		f.Seed = *seed
	}
	if set["duration"] || set["warmup"] || set["interval"] {
		if err := f.Validate(); err != nil {
			// A new value may clash with the file (a warm-up longer than
			// the duration, say): name the flags and the file's line.
			return usageError(fs, flagNames(set, "duration", "warmup", "interval"), err)
		}
	}
	var plotFile *outfile.File
	if *plotPath != "" {
		// Open the file now, so an unwritable path fails before the run.
		// It replaces the path only once the plot is written: a run that
		// fails leaves an earlier plot there as it was.
		if plotFile, err = outfile.Create(*plotPath); err != nil {
			return usageError(fs, "-plot", err)
		}
		defer plotFile.Discard()
	}
	return simulate(e, f, *asJSON, plotFile, format)
}

// simulate runs the scenario and writes its report, and its plot when
// plotFile is not nil.
func simulate(e env, f *scenario.File, asJSON bool, plotFile *outfile.File, format string) int {
	res, err := f.Run()
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice sim: %s\n", escape(err.Error()))
		if errors.Is(err, scenario.ErrInvalid) {
			return ExitUsage
		}
		return ExitFail
	}
	r := report.FromSim(f.Scenario, res, f.Report.Within)
	r.File = f.Path
	if asJSON {
		err = report.JSON(e.stdout, r)
	} else {
		err = report.Table(e.stdout, r)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice sim: writing the report: %v\n", err)
		return ExitFail
	}
	if plotFile != nil {
		err := report.Plot(plotFile, format, r)
		if err == nil {
			err = plotFile.Commit()
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "sluice sim: plot: %v\n", err)
			return ExitFail
		}
		fmt.Fprintf(e.stderr, "sluice sim: wrote %s\n", escape(plotFile.Path()))
	}
	return ExitOK
}

// loadScenario loads the scenario file at path (see checkScenarioPath).
// Every command that reads a scenario file goes through it, so that they
// word and exit alike: see badScenario.
func loadScenario(path string) (*scenario.File, error) {
	if err := checkScenarioPath(path); err != nil {
		return nil, err
	}
	return scenario.Load(path)
}

// checkScenarioPath rejects, in plain words, the names that are not
// scenario files, before anything tries to read them.
func checkScenarioPath(path string) error {
	switch path {
	case "":
		return errors.New("the scenario file name is empty")
	case "-":
		return errors.New(`"-": a scenario is read from a file, not from standard input`)
	}
	if isDir(path) {
		return fmt.Errorf("%s is a directory, not a scenario file", path)
	}
	return nil
}

// badScenario reports a scenario file that could not be loaded and
// returns ExitUsage: a file that cannot be opened is bad input, like one
// that does not parse, and either way nothing ran. The error names the
// file (and line and field when it is the content).
func badScenario(e env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "sluice %s: %s\n", cmd, escape(err.Error()))
	return ExitUsage
}

// flagNames lists the flags among names that set holds, as "-a, -b".
func flagNames(set map[string]bool, names ...string) string {
	s := ""
	for _, n := range names {
		if set[n] {
			if s != "" {
				s += ", "
			}
			s += "-" + n
		}
	}
	return s
}

// usageError reports a bad flag value, naming the flag, and returns
// ExitUsage.
func usageError(fs *flag.FlagSet, flagName string, err error) int {
	fmt.Fprintf(fs.Output(), "%s: %s: %s\n", fs.Name(), flagName, escape(err.Error()))
	return ExitUsage
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// escape replaces the characters of s that are not printable, newlines
// aside, by Go escapes ("\x1b", "\u202e"): error messages quote keys and
// values from a file, and a terminal escape or a bidirectional-text
// control there must not reach the terminal.
func escape(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == '\n' || (unicode.IsPrint(r) && (r != utf8.RuneError || n > 1)) {
			b.WriteString(s[:n])
		} else {
			q := strconv.Quote(s[:n])
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}
