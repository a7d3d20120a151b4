package yamlfile

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Union says how to fill a field of an interface type from a mapping one of
// whose keys names the concrete type: a scenario policy is
// "kind: concurrency" and the concurrency policy's own keys.
type Union struct {
	Key   string   // the naming key, e.g. "kind"
	Names []string // what Key may be, listed when it is missing
	// New returns a value of the type name names (its fields are the
	// mapping's other keys) or an error saying why name is not one.
	New func(name string) (any, error)
}

// union sets v from mapping node n as u describes. A key that belongs to
// another of u's types is unknown here, like any other.
func (d *decoder) union(n *yaml.Node, path string, v reflect.Value, u Union) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of keys, got %s", describe(n))
		return
	}
	keyPath := join(path, u.Key)
	// The key may come from a merge key ("<<: *base"); a key written
	// here wins, as YAML specifies. Looking costs steps like decoding.
	if !d.spend(n, len(n.Content)/2) {
		return
	}
	at, found := findKey(n.Content, u.Key)
	for i := 0; !found && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Tag == "!!merge" {
			at, found = findKey(d.mergePairs(n.Content[i+1], path, []*yaml.Node{n}), u.Key)
		}
	}
	if !found {
		d.errorf(n, keyPath, "is required (%s)", strings.Join(u.Names, ", "))
		return
	}
	name, _ := d.scalar(at, keyPath)
	x, err := u.New(name)
	if err == nil && x == nil {
		d.errorf(at, keyPath, "cannot be set from a file (%q names no type)", name)
		return
	}
	if err != nil {
		if name != "" || at.Kind == yaml.ScalarNode {
			d.errorf(at, keyPath, "%v", err)
		}
		return
	}
	xv := reflect.New(reflect.TypeOf(x)).Elem()
	var discard string // the naming key, read above
	d.mapping(n, path, xv, field{u.Key, reflect.ValueOf(&discard).Elem()})
	v.Set(xv)
}

// findKey returns the value of key among key, value pairs.
func findKey(pairs []*yaml.Node, key string) (*yaml.Node, bool) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if k := pairs[i]; k.Tag != "!!merge" && k.Value == key {
			return pairs[i+1], true
		}
	}
	return nil, false
}
