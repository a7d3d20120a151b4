package proxy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every field of the config file is documented in docs/proxy.md, by its
// full path (a section such as policies[].rate by its fields).
func TestDocsNameEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	var leaves []string
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		if typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct {
			path += "[]"
			typ = typ.Elem()
		}
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			leaves = append(leaves, path)
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if path != "" {
				name = path + "." + name
			}
			walk(name, f.Type)
		}
	}
	walk("", reflect.TypeFor[Config]())
	if len(leaves) < 40 {
		t.Fatalf("walked only %d fields: the walk is broken", len(leaves))
	}
	for _, p := range leaves {
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("docs/proxy.md does not document `%s`", p)
		}
	}
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
