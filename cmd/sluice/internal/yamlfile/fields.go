package yamlfile

import (
	"maps"
	"reflect"
	"slices"
	"strings"
)

// The struct side of decoding: which keys a Go type takes.

// field is one key of a mapping and the struct field it sets.
type field struct {
	name string
	v    reflect.Value
}

// structFields lists v's keys in declaration order: each exported field's
// yaml tag name (its lower-cased Go name when untagged, as yaml.v3 does),
// with fields tagged ",inline" spliced in.
func structFields(v reflect.Value) []field {
	var out []field
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" && sf.Type.Kind() == reflect.Struct {
			out = append(out, structFields(v.Field(i))...)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out = append(out, field{name, v.Field(i)})
	}
	return out
}

// known lists the keys of a mapping, sorted, for "unknown key" errors.
func known(fields map[string]reflect.Value) string {
	return strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
}

// Key is one key a struct type takes in a file, and the type of its value.
type Key struct {
	Name string
	Type reflect.Type
}

// Keys lists the keys of struct type t as Decode reads them, in
// declaration order, for walks such as a test that the docs name every
// key.
func Keys(t reflect.Type) []Key {
	var out []Key
	for _, f := range structFields(reflect.New(t).Elem()) {
		out = append(out, Key{f.name, f.v.Type()})
	}
	return out
}
