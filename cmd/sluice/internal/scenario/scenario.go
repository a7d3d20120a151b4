// Package scenario reads scenario files: YAML documents that describe one
// simulator experiment (an origin, a load, the policies to compare) and how
// to report it. docs/scenarios.md is the reference for the format.
//
// The keys are the yaml tags of sim.Scenario and its parts, so the format
// follows the simulator's types. What this package adds is the checking a
// file needs and a Go struct does not: every problem is an *Error naming the
// file, the line and the field path ("scenarios/x.yaml:12: origin.service.mean:
// must be > 0, got 0s"); unknown and repeated keys are errors; durations are
// Go duration strings ("2.5s"). A file that parses is then validated by
// sim.Scenario.Validate, whose errors get the line of the field they name.
// Nothing runs until the whole file is valid.
package scenario

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/sim"
)

// File is a parsed and validated scenario file.
type File struct {
	// Scenario is the experiment, ready for sim.Run. Its keys sit at the
	// top level of the file. When the file sets no name, Name is the file's
	// base name without its extension.
	sim.Scenario `yaml:",inline"`
	// Report tunes the summary; it does not change the run.
	Report Report `yaml:"report"`
	// Path is the file the scenario was read from.
	Path string `yaml:"-"`

	lines yamlfile.Lines // field path -> line, for errors found after parsing
}

// Report holds the file's reporting options.
type Report struct {
	// Within, when > 0, adds two columns to the summary: successes whose
	// latency was at most Within, and requests admitted after waiting at
	// most Within (seed 001's "served within 1 s"). Default 0: no columns.
	Within time.Duration `yaml:"within"`
}

// ErrInvalid is matched (errors.Is) by every error about a scenario file's
// content, as opposed to an error reading it. It is yamlfile's: scenario
// files and the proxy's config are read by the same decoder.
var ErrInvalid = yamlfile.ErrInvalid

// Error is one problem in a scenario file: where it is and what is wrong.
// It prints as FILE:LINE: FIELD: MESSAGE, the form editors jump to.
type Error = yamlfile.Error

// Load reads, parses and validates the scenario file at path. A file over
// 1 MiB is refused: a scenario is a page of YAML, and a path to something
// endless (/dev/zero) must not eat the memory.
func Load(path string) (*File, error) {
	data, err := yamlfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses and validates a scenario file's contents; name is used in
// errors and for the default scenario name. Every error about the content
// matches ErrInvalid; the first problem is an *Error (errors.As), and up to
// ten are reported, joined. ${NAME} in values is left as written: a scenario
// is data, and has no secrets to fetch from the environment.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Path: name}
	lines, err := yamlfile.Decode(name, data, f, yamlfile.Options{What: "scenario", Unions: policyUnion})
	if err != nil {
		return nil, err
	}
	f.lines = lines
	if f.Name == "" {
		f.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := f.checkChangesInRun(); err != nil {
		return nil, err
	}
	return f, nil
}

// checkChangesInRun refuses an origin change at or after the file's
// duration: the run ends before it applies, so the file describes a
// slowdown (or a loss of workers) that no run shows, most likely a typo in
// a time. Parse checks it and Validate does not: a -duration flag may cut
// a run short of its changes on purpose, for a quick look.
func (f *File) checkChangesInRun() error {
	for i, c := range f.Origin.Changes {
		if c.At >= f.Duration {
			return f.errorAt(fmt.Sprintf("origin.changes[%d].at", i),
				fmt.Sprintf("must be before the end of the run (duration %v), got %v", f.Duration, c.At))
		}
	}
	return nil
}

// Validate checks the file's own options and the scenario
// (sim.Scenario.Validate, which also refuses a run too large to hold in
// memory or finish in seconds). Parse calls it; call it again after changing the scenario
// (a -duration flag, say). Its errors name file and line.
func (f *File) Validate() error {
	if f.Report.Within < 0 {
		return f.errorAt("report.within", fmt.Sprintf("must be >= 0, got %v", f.Report.Within))
	}
	if err := f.simError(f.Scenario.Validate()); err != nil {
		return err
	}
	// Rows and plot lines are told apart by name; the simulator names an
	// unnamed policy after its kind, so two unnamed adaptive policies
	// would look like one.
	first := map[string]int{}
	for i, p := range f.Policies {
		if p == nil {
			continue // sim's Validate has said so
		}
		name := p.Label()
		if j, ok := first[name]; ok {
			return f.errorAt(fmt.Sprintf("policies[%d].name", i),
				fmt.Sprintf("%q already names policies[%d]: give each policy its own name", name, j))
		}
		first[name] = i
	}
	return nil
}

// Run runs the scenario in the simulator. A scenario problem the simulator
// finds only when it builds a policy is an *Error at its line, as if the
// parse had found it.
func (f *File) Run() (sim.Result, error) {
	res, err := sim.Run(f.Scenario)
	return res, f.simError(err)
}

// simError places a *sim.FieldError at its line; other errors pass.
func (f *File) simError(err error) error {
	var fe *sim.FieldError
	if errors.As(err, &fe) {
		return f.errorAt(fe.Field, fe.Problem)
	}
	return err
}

// ErrorAt returns a problem found outside this package (what the lab's
// sockets cannot run, say) as an *Error at the line of field, a key path
// as the file writes it ("origin.workers"), or of its nearest parent when
// the field is not written there. cause, if not nil, is what errors.As
// reaches through it.
func (f *File) ErrorAt(field, problem string, cause error) error {
	err := f.errorAt(field, problem).(*Error)
	err.Err = cause
	return err
}

// errorAt places a problem found after decoding at the line of the field it
// names, or of its nearest parent in the file when the field is not written
// there (a required key left out).
func (f *File) errorAt(field, problem string) error {
	line, exact := f.lines.Line(field)
	if !exact {
		problem += " (not set in the file)"
	}
	return &Error{File: f.Path, Line: line, Field: field, Msg: problem}
}
