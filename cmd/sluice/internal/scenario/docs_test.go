package scenario

import (
	"encoding"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/sim"
)

// TestDocsListEveryKey: docs/scenarios.md names every key a scenario file
// accepts, as `path.to.key`. The keys come from the simulator's types, so a
// field added there without a line in the reference fails here.
func TestDocsListEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := fileKeys(reflect.TypeFor[File](), "", map[reflect.Type]bool{})
	if len(keys) < 60 {
		t.Fatalf("found only %d keys: the walk is broken", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/scenarios.md does not document `%s`", k)
		}
	}
}

// fileKeys lists the key paths of struct type t as the decoder reads them.
// A struct type met a second time (origin.changes[].service is a
// origin.service) is listed by its own path only: the docs refer back.
func fileKeys(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	var keys []string
	for _, f := range yamlfile.Keys(t) {
		path := f.Name
		if prefix != "" {
			path = prefix + "." + f.Name
		}
		keys = append(keys, path)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft, path = ft.Elem(), path+"[]"
		}
		if ft == reflect.TypeFor[sim.Policy]() {
			// One type per kind: the keys of each, and kind.
			keys = append(keys, path+".kind")
			for _, k := range sim.PolicyKinds() {
				p, _ := sim.NewPolicy(k)
				for _, key := range fileKeys(reflect.TypeOf(p), path, seen) {
					if !slices.Contains(keys, key) {
						keys = append(keys, key)
					}
				}
			}
			continue
		}
		if ft.Kind() != reflect.Struct || ft == reflect.TypeFor[time.Duration]() || reflect.PointerTo(ft).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			continue
		}
		if seen[ft] {
			continue
		}
		seen[ft] = true
		keys = append(keys, fileKeys(ft, path, seen)...)
	}
	return keys
}

// TestDocsExampleParses: the example file in docs/scenarios.md is a valid
// scenario, so a reader who copies it gets a run, not an error.
func TestDocsExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/scenarios.md has no ```yaml example")
	}
	if _, err := Parse("docs/scenarios.md example", []byte(example)); err != nil {
		t.Error(err)
	}
}
