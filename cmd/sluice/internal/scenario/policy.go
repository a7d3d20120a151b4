package scenario

import (
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/sim"
	"gopkg.in/yaml.v3"
)

var policyType = reflect.TypeFor[sim.Policy]()

// policy sets the sim.Policy v from mapping node n: its kind key picks the
// policy's type (sim.NewPolicy), whose fields are the mapping's other keys.
// A key of another kind is unknown here, like any other.
func (d *decoder) policy(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of keys, got %s", describe(n))
		return
	}
	kindPath := join(path, "kind")
	// The kind may come from a merge key ("<<: *base"); a key written
	// here wins, as YAML specifies. Looking costs steps like decoding.
	if !d.spend(n, len(n.Content)/2) {
		return
	}
	at, found := findKey(n.Content, "kind")
	for i := 0; !found && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Tag == "!!merge" {
			at, found = findKey(d.mergePairs(n.Content[i+1], path), "kind")
		}
	}
	var kind string
	if found {
		kind, _ = d.scalar(at, kindPath)
	}
	if !found {
		d.errorf(n, kindPath, "is required (%s)", kindList())
		return
	}
	p, err := sim.NewPolicy(sim.PolicyKind(kind))
	if err != nil {
		if kind != "" || at.Kind == yaml.ScalarNode {
			d.errorf(at, kindPath, "%v", err)
		}
		return
	}
	pv := reflect.New(reflect.TypeOf(p)).Elem()
	var discard string // the kind key, read above
	d.mapping(n, path, pv, field{"kind", reflect.ValueOf(&discard).Elem()})
	v.Set(pv)
}

// kindList names the policy kinds, for errors.
func kindList() string {
	var names []string
	for _, k := range sim.PolicyKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
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
