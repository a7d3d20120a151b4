// Package cli is the sluice command: subcommand dispatch, flags and exit
// codes. cmd/sluice only calls Main, so that tests run every subcommand
// in-process.
//
// Exit codes: 0 success, 1 a run that failed, 2 bad usage or bad input (an
// unknown subcommand or flag, a scenario file that cannot be opened or
// parsed). On exit code 2 nothing ran.
//
// To add a subcommand, write its run function in a file of its own and add
// one line to commands.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// Exit codes.
const (
	ExitOK    = 0 // success
	ExitFail  = 1 // the run failed
	ExitUsage = 2 // bad usage or bad input: nothing ran
)

// env is where a subcommand writes.
type env struct {
	stdout, stderr io.Writer
}

// command is one subcommand. run defines its flags on fs (which prints the
// command's usage on -h and reports errors instead of exiting) and parses
// args with parse.
type command struct {
	name    string
	args    string // synopsis of the arguments, for usage
	summary string
	run     func(e env, fs *flag.FlagSet, args []string) int
}

// commands is the subcommand table, in the order usage lists them. help is
// not in it: it reads the table, and Main answers it before looking here.
var commands = []command{
	{"sim", "[flags] SCENARIO.yaml", "run a scenario in virtual time and compare its policies", runSim},
	{"origin", "[flags] [SCENARIO.yaml]", "serve HTTP like the simulator's origin: workers, a queue, service times", runOrigin},
	{"load", "[flags] URL", "send an open-loop load to URL and measure goodput and latency", runLoad},
	{"proxy", "-config FILE [-check]", "serve as an HTTP reverse proxy with the limits the config file sets", runProxy},
	{"lab", "[flags] [SCENARIO.yaml ...] | capacity [flags] URL", "run the seeds' experiments on loopback sockets and in the simulator, side by side, into an HTML report", runLab},
	{"version", "", "print the version", runVersion},
}

// help is listed after commands.
var help = command{name: "help", args: "[COMMAND]", summary: "show help for the command or a subcommand"}

// Main runs the sluice command with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	e := env{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stdout)
		return ExitOK
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(stdout)
		return ExitOK
	}
	if name == help.name {
		return runHelp(e, args[1:])
	}
	if c, ok := lookup(name); ok {
		return c.run(e, newFlagSet(e, c), args[1:])
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", name)
	usage(stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `sluice: overload protection for Go services.

Usage:

	sluice COMMAND [flags] [args]

Commands:

`)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range append(commands[:len(commands):len(commands)], help) {
		fmt.Fprintf(tw, "\t%s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Run "sluice help COMMAND" for a command's flags. Try:

	sluice sim scenarios/seed003-slowdown.yaml
`)
}

func runHelp(e env, args []string) int {
	if len(args) == 0 {
		usage(e.stdout)
		return ExitOK
	}
	if len(args) > 1 {
		fmt.Fprintf(e.stderr, "sluice help: want at most one command, got %q\n", args)
		return ExitUsage
	}
	if args[0] == help.name {
		usage(e.stdout)
		return ExitOK
	}
	if c, ok := lookup(args[0]); ok {
		// Each command prints its own usage on -h.
		out := env{stdout: e.stdout, stderr: e.stdout}
		c.run(out, newFlagSet(out, c), []string{"-h"})
		return ExitOK
	}
	fmt.Fprintf(e.stderr, "sluice help: unknown command %q\n", args[0])
	return ExitUsage
}

// lookup finds the subcommand called name in commands.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func runVersion(e env, fs *flag.FlagSet, args []string) int {
	if _, code, ok := parse(fs, args, 0); !ok {
		return code
	}
	fmt.Fprintln(e.stdout, version())
	return ExitOK
}

// version describes the build from the information the Go toolchain embeds.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "sluice (unknown version)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	s := "sluice " + v
	var rev, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " " + rev + dirty
	}
	return s + " " + bi.GoVersion
}

// newFlagSet returns a flag set for c that reports errors instead of
// exiting, and prints the command's usage and flags on -h.
func newFlagSet(e env, c command) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: sluice %s %s\n\n%s.\n", c.name, c.args, upperFirst(c.summary))
		if hasFlags(fs) {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parse parses args with fs, allowing flags after positional arguments
// ("sluice sim x.yaml --json"), which the flag package alone does not. It
// returns the positional arguments; want is how many there must be (-1 for
// any number). When ok is false, the command returns code.
func parse(fs *flag.FlagSet, args []string, want int) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, false
			}
			// The flag package has already printed the error and usage.
			return nil, ExitUsage, false
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...) // after "--" everything is positional
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if want >= 0 && len(pos) != want {
		switch {
		case want == 0:
			fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), pos[0])
		case len(pos) < want:
			fmt.Fprintf(fs.Output(), "%s: missing argument\n", fs.Name())
		default:
			fmt.Fprintf(fs.Output(), "%s: want %d argument(s), got %d: %s\n", fs.Name(), want, len(pos), strings.Join(pos, " "))
		}
		fs.Usage()
		return nil, ExitUsage, false
	}
	return pos, ExitOK, true
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
