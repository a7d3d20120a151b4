package yamlfile

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExpandEnv(t *testing.T) {
	t.Setenv("YF_SET", "v")
	t.Setenv("YF_EMPTY", "")
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${YF_SET}-${YF_SET}", "v-v", ""},
		{"a${YF_EMPTY}b", "ab", ""},
		{"$$5 and ^a$", "$5 and ^a$", ""},
		{"${YF_UNSET_1} ${YF_UNSET_2}", "", "YF_UNSET_1, YF_UNSET_2 is not set"},
	} {
		got, err := ExpandEnv(tc.in)
		if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

type doc struct {
	Name    string        `yaml:"name"`
	Wait    time.Duration `yaml:"wait"`
	Section *struct {
		N int `yaml:"n"`
	} `yaml:"section"`
	Items []struct {
		V string `yaml:"v"`
	} `yaml:"items"`
}

func TestDecode(t *testing.T) {
	t.Setenv("YF_NAME", "from-env")
	var d doc
	lines, err := Decode("f.yaml", []byte("name: ${YF_NAME}\nwait: 2s\nsection: {n: 3}\nitems:\n  - v: a\n"), &d, Options{Expand: ExpandEnv})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "from-env" || d.Wait != 2*time.Second || d.Section == nil || d.Section.N != 3 || d.Items[0].V != "a" {
		t.Errorf("decoded %+v", d)
	}
	if e := lines.At("f.yaml", "items[0].v", "bad"); e.Line != 5 || e.Error() != "f.yaml:5: items[0].v: bad" {
		t.Errorf("Lines.At: %v", e)
	}
	if e := lines.At("f.yaml", "section.missing", "bad"); e.Line != 3 {
		t.Errorf("Lines.At of an unwritten field: line %d, want its section's (3)", e.Line)
	}
	var absent doc
	if _, err := Decode("f.yaml", []byte("name: x\n"), &absent, Options{}); err != nil || absent.Section != nil {
		t.Errorf("an absent section: %+v, %v; want nil", absent.Section, err)
	}
	for _, text := range []string{"section:\n", "section: null\n", "section: ~\n"} {
		var empty doc
		if _, err := Decode("f.yaml", []byte(text), &empty, Options{}); err != nil || empty.Section == nil {
			t.Errorf("%q: section %+v, %v; want present, as {}", text, empty.Section, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nmae: x\n", "f.yaml:1: nmae: unknown key (known here: items, name, section, wait)"},
		{"name: a\nname: b\n", "f.yaml:2: name: key given twice"},
		{"wait: 5\n", `f.yaml:1: wait: "5" has no unit`},
		{"section: {n: x}\n", `f.yaml:1: section.n: "x" is not a whole number`},
		{"name: ${YF_UNSET}\n", "f.yaml:1: name: environment variable YF_UNSET is not set"},
		{"", "f.yaml:1: empty file"},
		{"a: 1\n---\nb: 2\n", "more than one YAML document"},
	} {
		var d doc
		_, err := Decode("f.yaml", []byte(tc.in), &d, Options{Expand: ExpandEnv})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want %q matching ErrInvalid", tc.in, err, tc.want)
		}
	}
}

// TestDecodeWhat: Options.What names the kind of file in the messages that
// say a file is not one.
func TestDecodeWhat(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "f.yaml:1: empty scenario file"},
		{"a: 1\n---\nb: 2\n", "f.yaml:2: more than one YAML document (a second \"---\"): a file holds one scenario"},
	} {
		var d doc
		_, err := Decode("f.yaml", []byte(tc.in), &d, Options{What: "scenario"})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

type shape interface{ area() int }

type square struct {
	Side int `yaml:"side"`
}

func (s square) area() int { return s.Side * s.Side }

// TestDecodeUnion: a Union's key picks the concrete type; the other keys
// are that type's fields.
func TestDecodeUnion(t *testing.T) {
	opt := Options{Unions: map[reflect.Type]Union{reflect.TypeFor[shape](): {
		Key:   "kind",
		Names: []string{"square"},
		New: func(name string) (any, error) {
			if name == "square" {
				return square{}, nil
			}
			return nil, fmt.Errorf("unknown kind %q", name)
		},
	}}}
	var v struct {
		Shapes []shape `yaml:"shapes"`
	}
	if _, err := Decode("f.yaml", []byte("shapes:\n  - {kind: square, side: 3}\n"), &v, opt); err != nil || len(v.Shapes) != 1 || v.Shapes[0].area() != 9 {
		t.Fatalf("decoded %+v, %v", v, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"shapes:\n  - {side: 3}\n", "f.yaml:2: shapes[0].kind: is required (square)"},
		{"shapes:\n  - {kind: circle}\n", `f.yaml:2: shapes[0].kind: unknown kind "circle"`},
		{"shapes:\n  - {kind: square, radius: 1}\n", "f.yaml:2: shapes[0].radius: unknown key (known here: kind, side)"},
	} {
		_, err := Decode("f.yaml", []byte(tc.in), &v, opt)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestDecodeChainedMerge: a mapping merged in may itself merge another
// ("<<: *b" where b is "{<<: *a, ...}"), as YAML and gopkg.in/yaml.v3
// allow; its own keys win over what it merges.
func TestDecodeChainedMerge(t *testing.T) {
	var d struct {
		Items []struct {
			V string `yaml:"v"`
			W string `yaml:"w"`
		} `yaml:"items"`
	}
	in := "items:\n  - &a {v: a, w: x}\n  - &b {<<: *a, v: b}\n  - {<<: *b}\n  - {<<: [*b, *a]}\n  - {<<: *b, w: y}\n"
	if _, err := Decode("f.yaml", []byte(in), &d, Options{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range d.Items {
		got = append(got, it.V+it.W)
	}
	if want := "ax bx bx bx by"; strings.Join(got, " ") != want {
		t.Errorf("items %v, want %s", got, want)
	}
	opt := Options{Unions: map[reflect.Type]Union{reflect.TypeFor[shape](): {
		Key: "kind", Names: []string{"square"},
		New: func(string) (any, error) { return square{}, nil },
	}}}
	var v struct {
		Shapes []shape `yaml:"shapes"`
	}
	in = "shapes:\n  - &a {kind: square, side: 3}\n  - &b {<<: *a, side: 4}\n  - {<<: *b}\n"
	if _, err := Decode("f.yaml", []byte(in), &v, opt); err != nil || len(v.Shapes) != 3 || v.Shapes[2].area() != 16 {
		t.Errorf("shapes %+v, %v; want the third merged from the second, side 4", v.Shapes, err)
	}
}

// TestDecodeSelfMerge: a merge key that reaches the mapping it is in, or
// one whose merge keys led to it, is an error at the alias, found at once;
// it used to expand level after level until the step budget ran out,
// copying the growing pair list at each level (a minute of CPU for a
// 4-line file).
func TestDecodeSelfMerge(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"section: &o {<<: *o, n: 1}\n", "f.yaml:1: section.<<: merge key includes its own mapping (line 1)"},
		{"items: [&p {<<: [*p, *p], v: b}]\n", "f.yaml:1: items[0].<<: merge key includes its own mapping (line 1)"},
		{"name: x\nsection: &o {<<: {<<: *o, n: 2}, n: 1}\n", "f.yaml:2: section.<<: merge key includes its own mapping (line 2)"},
	} {
		var d doc
		_, err := Decode("f.yaml", []byte(tc.in), &d, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestDecodeDeepMerge: a long chain of mappings each merging the one
// before is charged for the pairs each level copies, so it is refused
// within the step budget instead of doing quadratic work under it. (The
// chain hangs off unknown keys, which are not decoded, so that only the
// final merge walks it.)
func TestDecodeDeepMerge(t *testing.T) {
	var b strings.Builder
	const levels = 20000
	b.WriteString("x0: &a0 {n: 1}\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "x%d: &a%d {<<: *a%d, n: 1}\n", i, i, i-1)
	}
	fmt.Fprintf(&b, "section: {<<: *a%d}\n", levels-1)
	var d doc
	_, err := Decode("f.yaml", []byte(b.String()), &d, Options{})
	if err == nil || !strings.Contains(err.Error(), "once aliases and merge keys are expanded") {
		t.Errorf("%d chained merges: %v, want the step budget's error", levels, err)
	}
}
