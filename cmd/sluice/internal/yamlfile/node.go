// Package yamlfile decodes a YAML file into Go structs strictly, node by
// node, so that every problem names its file, line and field: an unknown or
// repeated key, a value of the wrong kind, a duration without a unit. It
// follows the yaml struct tags of the target, like gopkg.in/yaml.v3, and
// bounds the work that aliases and merge keys can multiply.
//
// Scenario files and the proxy's config file use it; only the proxy's
// turns on Options.Expand for ${ENV} references (a config may need a
// secret; a scenario is data).
package yamlfile

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrInvalid is matched (errors.Is) by every error about a file's content,
// as opposed to an error reading it.
var ErrInvalid = errors.New("invalid file")

// Error is one problem in a file: where it is and what is wrong.
// It prints as FILE:LINE: FIELD: MESSAGE, the form editors jump to.
type Error struct {
	File  string
	Line  int
	Field string // path as written in the file, e.g. "policies[1].limit"; "" for the whole file
	Msg   string
	Err   error // the cause, if any (a *sluice.ConfigError, say); see Unwrap
}

// Unwrap returns the cause, so that errors.Is and errors.As reach it.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// maxErrors bounds how many problems one parse reports: past a few, the
// rest are usually echoes of the first.
const maxErrors = 10

// decoder walks a YAML node tree into a Go value, field by field, so that
// every problem names its line and field path. It follows the yaml struct
// tags of the target, so the file format is the simulator's types as they
// are: a field added there is a key here.
type decoder struct {
	file   string
	expand func(string) (string, error)
	what   string // for "not a config file"
	unions map[reflect.Type]Union
	errs   []error
	lines  map[string]int // field path -> line, for errors found later
	steps  int            // values and keys visited, aliases expanded: see spend
}

// maxSteps bounds the work of one parse. Aliases and merge keys let a small
// file name the same large mapping many times over (a 600 kB file could
// expand to billions of keys and exhaust memory); a real file visits a few
// hundred values.
const maxSteps = 200_000

// spend counts n steps of work at node at and reports whether the budget
// allows them; the first time it does not, the parse fails there.
func (d *decoder) spend(at *yaml.Node, n int) bool {
	if d.steps > maxSteps {
		return false
	}
	d.steps += n
	if d.steps > maxSteps {
		d.errs = append(d.errs, &Error{File: d.file, Line: at.Line,
			Msg: fmt.Sprintf("more than %d keys and values once aliases and merge keys are expanded: not a %s file", maxSteps, d.what)})
		return false
	}
	return true
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	e := &Error{File: d.file, Line: n.Line, Field: path, Msg: fmt.Sprintf(format, args...)}
	for _, prev := range d.errs {
		// The same problem met again (a merge list naming one bad
		// mapping twice, say) says nothing new.
		if p, ok := prev.(*Error); ok && *p == *e {
			return
		}
	}
	d.errs = append(d.errs, e)
}

var durationType = reflect.TypeFor[time.Duration]()

// decode sets v (addressable) from n; path names n in errors.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	if !d.spend(n, 1) {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		// "key:" with nothing: leave the default. But an optional
		// section so written is present, as "key: {}" is: the file
		// named it, and dropping it would report what it lacks under
		// whatever the file meant it to replace.
		if v.Kind() == reflect.Pointer && v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return
	}
	if v.Type() == durationType {
		d.duration(n, path, v)
		return
	}
	if u, ok := d.unions[v.Type()]; ok {
		d.union(n, path, v, u)
		return
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		// Named values such as concurrency.Discipline ("lifo") parse
		// themselves.
		if s, ok := d.scalar(n, path); ok {
			if err := u.UnmarshalText([]byte(s)); err != nil {
				d.errorf(n, path, "%v", err)
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		// An optional section: present in the file means set.
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, path, v.Elem())
	case reflect.Struct:
		d.mapping(n, path, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "want a list, got %s", describe(n))
			return
		}
		if !d.spend(n, len(n.Content)) {
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.decode(e, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		if s, ok := d.scalar(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		s, ok := d.scalar(n, path)
		switch {
		case !ok:
		case s == "true":
			v.SetBool(true)
		case s == "false":
			v.SetBool(false)
		default:
			d.errorf(n, path, "%q is not true or false", s)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(i) {
			d.errorf(n, path, "%q is not a whole number", s)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v.OverflowUint(u) {
			d.errorf(n, path, "%q is not a whole number >= 0", s)
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.errorf(n, path, "%q is not a number", s)
			return
		}
		v.SetFloat(f)
	default:
		// A type the file format has no spelling for: a bug here, not in
		// the file, but still not a reason to panic.
		d.errorf(n, path, "cannot be set from a file (type %s)", v.Type())
	}
}

// mapping sets the fields of struct v from mapping node n. Keys are the
// fields' yaml tags; an unknown or repeated key is an error. YAML merge
// keys ("<<: *anchor") bring in an anchored mapping's keys; keys written
// next to them win, as YAML specifies.
// Extra fields are keys v does not have (a union's kind).
func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value, extra ...field) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of keys, got %s", describe(n))
		return
	}
	fields := map[string]reflect.Value{}
	for _, f := range append(structFields(v), extra...) {
		fields[f.name] = f.v
	}
	explicit := map[string]bool{}
	var merged []*yaml.Node // key, value pairs from merge keys
	if !d.spend(n, len(n.Content)/2) {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			merged = append(merged, d.mergePairs(val, path, []*yaml.Node{n})...)
			continue
		}
		kp := join(path, k.Value)
		f, ok := fields[k.Value]
		switch {
		case !ok:
			d.errorf(k, kp, "unknown key (known here: %s)", known(fields))
		case explicit[k.Value]:
			d.errorf(k, kp, "key given twice")
		default:
			explicit[k.Value] = true
			d.lines[kp] = k.Line
			d.decode(val, kp, f)
		}
	}
	set := map[string]bool{}
	for i := 0; i+1 < len(merged); i += 2 {
		k, val := merged[i], merged[i+1]
		if explicit[k.Value] || set[k.Value] {
			continue // an explicit key, or an earlier merge, wins
		}
		kp := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			d.errorf(k, kp, "unknown key (known here: %s; merged from line %d)", known(fields), k.Line)
			continue
		}
		set[k.Value] = true
		d.lines[kp] = k.Line
		d.decode(val, kp, f)
	}
}

// mergePairs returns the key, value pairs a merge key's value brings: an
// anchored mapping, or a list of them (earlier ones win). A mapping that
// has merge keys of its own brings what they bring too, after its own
// keys, which win over them; no merge key is among the pairs returned.
// onPath holds the mappings whose merge keys led here, starting with the
// one being decoded: a merge that reaches one of them again
// ("&o {<<: *o}") is refused, as it would bring its own keys without end.
func (d *decoder) mergePairs(val *yaml.Node, path string, onPath []*yaml.Node) []*yaml.Node {
	at := val // the alias, to report where it is written
	for val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	if !d.spend(val, len(val.Content)) {
		return nil
	}
	var out []*yaml.Node
	switch val.Kind {
	case yaml.MappingNode:
		if slices.Contains(onPath, val) {
			d.errorf(at, join(path, "<<"), "merge key includes its own mapping (line %d)", val.Line)
			return nil
		}
		onPath = append(onPath, val)
		var merged []*yaml.Node
		for i := 0; i+1 < len(val.Content); i += 2 {
			if k := val.Content[i]; k.Tag == "!!merge" {
				merged = append(merged, d.mergePairs(val.Content[i+1], path, onPath)...)
			} else {
				out = append(out, k, val.Content[i+1])
			}
		}
		out = append(out, merged...)
	case yaml.SequenceNode:
		for _, e := range val.Content {
			out = append(out, d.mergePairs(e, path, onPath)...)
		}
	default:
		d.errorf(val, join(path, "<<"), "a merge key takes a mapping or a list of them, got %s", describe(val))
		return nil
	}
	// Each level copies what the levels below it brought: charge for it,
	// or merges nested deep enough would do quadratic work within the
	// budget.
	if !d.spend(val, len(out)) {
		return nil
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "want a single value, got %s", describe(n))
		return "", false
	}
	if d.expand != nil {
		s, err := d.expand(n.Value)
		if err != nil {
			d.errorf(n, path, "%v", err)
			return "", false
		}
		return s, true
	}
	return n.Value, true
}

// duration reads a Go duration string: "2.5s", "75ms", "1m30s".
func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	s, ok := d.scalar(n, path)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			d.errorf(n, path, "%q has no unit: write a duration like %q", s, s+"s")
		} else {
			d.errorf(n, path, "%q is not a duration (want e.g. \"2.5s\", \"75ms\")", s)
		}
		return
	}
	v.SetInt(int64(dur))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}
