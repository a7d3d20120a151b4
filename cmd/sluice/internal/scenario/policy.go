package scenario

import (
	"reflect"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/sim"
)

// policyUnion reads a sim.Policy: its kind key picks the policy's type
// (sim.NewPolicy), whose fields are the mapping's other keys. A key of
// another kind is unknown here, like any other.
var policyUnion = map[reflect.Type]yamlfile.Union{
	reflect.TypeFor[sim.Policy](): {
		Key:   "kind",
		Names: kindNames(),
		New:   func(kind string) (any, error) { return sim.NewPolicy(sim.PolicyKind(kind)) },
	},
}

// kindNames names the policy kinds, for errors.
func kindNames() []string {
	var names []string
	for _, k := range sim.PolicyKinds() {
		names = append(names, string(k))
	}
	return names
}
