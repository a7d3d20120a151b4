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
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim"
	"gopkg.in/yaml.v3"
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

	lines map[string]int // field path -> line, for errors found after parsing
}

// Report holds the file's reporting options.
type Report struct {
	// Within, when > 0, adds two columns to the summary: successes whose
	// latency was at most Within, and requests admitted after waiting at
	// most Within (seed 001's "served within 1 s"). Default 0: no columns.
	Within time.Duration `yaml:"within"`
}

// maxFileSize bounds what Load reads: a scenario is a page of YAML, and
// a path to something endless (/dev/zero) must not eat the memory.
const maxFileSize = 1 << 20

// Load reads, parses and validates the scenario file at path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, &Error{File: path, Line: 1, Msg: fmt.Sprintf("larger than %d bytes: not a scenario file", maxFileSize)}
	}
	return Parse(path, data)
}

// Parse parses and validates a scenario file's contents; name is used in
// errors and for the default scenario name. Every error about the content
// matches ErrInvalid; the first problem is an *Error (errors.As), and up to
// ten are reported, joined.
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{file: name, lines: map[string]int{}}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		return nil, &Error{File: name, Line: 1, Msg: "empty scenario file"}
	case err != nil:
		return nil, syntaxError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, syntaxError(name, err)
		}
		return nil, &Error{File: name, Line: line, Msg: "more than one YAML document (a second \"---\"): a file holds one scenario"}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}

	f := &File{Path: name, lines: d.lines}
	d.decode(doc, "", reflect.ValueOf(f).Elem())
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	if f.Name == "" {
		f.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
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

// errorAt places a problem found after decoding at the line of the field it
// names, or of its nearest parent in the file when the field is not written
// there (a required key left out).
func (f *File) errorAt(field, problem string) error {
	p := field
	for {
		if line, ok := f.lines[p]; ok {
			if p != field {
				problem += " (not set in the file)"
			}
			return &Error{File: f.Path, Line: line, Field: field, Msg: problem}
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return &Error{File: f.Path, Line: 1, Field: field, Msg: problem + " (not set in the file)"}
		}
		p = p[:i]
	}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the YAML parser's "yaml: line N: msg" into FILE:N: msg.
func syntaxError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: name, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: name, Line: 1, Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: ")}
}
