package proxy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
)

// Every field of the config file is documented in docs/proxy.md, by its
// full path (a section such as policies[].rate by its fields).
func TestDocsNameEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	leaves := docKeys(reflect.TypeFor[Config](), "")
	if len(leaves) < 40 {
		t.Fatalf("walked only %d fields: the walk is broken", len(leaves))
	}
	for _, p := range leaves {
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("docs/proxy.md does not document `%s`", p)
		}
	}
}

// docKeys lists the key paths of struct type t as the decoder reads them
// (yamlfile.Keys), down to the leaves: a list of sections as
// section[].key, a pointer to a section (policies[].rate) as the section.
func docKeys(t reflect.Type, prefix string) []string {
	var leaves []string
	for _, k := range yamlfile.Keys(t) {
		path, typ := k.Name, k.Type
		if prefix != "" {
			path = prefix + "." + path
		}
		if typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct {
			path, typ = path+"[]", typ.Elem()
		}
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			leaves = append(leaves, path)
			continue
		}
		leaves = append(leaves, docKeys(typ, path)...)
	}
	return leaves
}

// The example configs are valid.
func TestExamplesCheck(t *testing.T) {
	t.Setenv("API_UPSTREAM", "http://127.0.0.1:9000")
	t.Setenv("REDIS_ADDR", "127.0.0.1:6390")
	t.Setenv("REDIS_PASSWORD", "secret")
	files, err := filepath.Glob("../../../../examples/proxy/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		c, err := LoadConfig(f)
		if err == nil {
			err = Check(c)
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
