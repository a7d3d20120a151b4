package yamlfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Options tune Decode.
type Options struct {
	// Expand, if set, rewrites every scalar value before it is parsed (not
	// keys); its error is reported at the value's line and field. ExpandEnv
	// is one.
	Expand func(string) (string, error)
	// What names what a file holds ("scenario"), for the messages that
	// say a file is not one: "empty scenario file". Empty: a config.
	What string
	// Unions fill interface-typed fields whose concrete type a key of
	// their mapping names (a scenario policy's "kind"); see Union.
	Unions map[reflect.Type]Union
}

// Lines maps a field path as written in the file ("routes[1].upstream")
// to the line where it was set, for errors found after decoding.
type Lines map[string]int

// At returns an *Error at path's line (see Line).
func (l Lines) At(file, path, msg string) *Error {
	line, _ := l.Line(path)
	return &Error{File: file, Line: line, Field: path, Msg: msg}
}

// Line returns the line of path, or of the nearest enclosing field that
// was written, or 1; exact says path itself was written.
func (l Lines) Line(path string) (line int, exact bool) {
	for p := path; ; {
		if n, ok := l[p]; ok {
			return n, p == path
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return 1, false
		}
		p = p[:i]
	}
}

// maxFileSize bounds what ReadFile reads: a config is a few pages of YAML,
// and a path to something endless (/dev/zero) must not eat the memory.
const maxFileSize = 1 << 20

// ReadFile reads path, refusing files over 1 MiB.
func ReadFile(path string) ([]byte, error) {
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
		return nil, &Error{File: path, Line: 1, Msg: fmt.Sprintf("larger than %d bytes", maxFileSize)}
	}
	return data, nil
}

// Decode decodes data, one YAML document named name in errors, into the
// struct v points to. Fields absent from the file keep the values v had.
// Every error about the content matches ErrInvalid; the first problem is
// an *Error (errors.As), and up to ten are reported, joined.
func Decode(name string, data []byte, v any, opt Options) (Lines, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		msg := "empty file"
		if opt.What != "" {
			msg = "empty " + opt.What + " file"
		}
		return nil, &Error{File: name, Line: 1, Msg: msg}
	case err != nil:
		return nil, syntaxError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(name, err)
		}
		msg := "more than one YAML document (a second \"---\")"
		if opt.What != "" {
			msg += ": a file holds one " + opt.What
		}
		return nil, &Error{File: name, Line: extra.Line, Msg: msg}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("yamlfile: Decode wants a non-nil pointer, got %T", v)
	}
	d := &decoder{file: name, expand: opt.Expand, what: cmp.Or(opt.What, "config"),
		unions: opt.Unions, lines: map[string]int{}}
	d.decode(doc, "", rv.Elem())
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return d.lines, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: name, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: name, Line: 1, Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: ")}
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\$`)

// ExpandEnv replaces ${NAME} with the environment variable NAME and $$ with
// $. A variable that is not set is an error (an empty secret is more
// often a mistake than a choice; set it to "" to mean empty). Other $ are
// left alone, so a value such as a regular expression needs no escaping.
func ExpandEnv(s string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}
