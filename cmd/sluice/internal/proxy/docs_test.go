package proxy

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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

// Every sluice_proxy_* and sluice_store_* family a proxy with a shared
// store exposes is a row of docs/proxy.md's tables with its labels, and
// every such row is exposed: the store's series come from promsluice, so
// a metric it adds or a label it changes shows here.
func TestDocsNameEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(sluice_(?:proxy|store)_[a-z_]+)` \\|([^|]*)\\|")
	label := regexp.MustCompile("`([a-z_]+)`")
	documented := map[string]string{} // name: its labels, sorted, comma-separated
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var ls []string
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			ls = append(ls, l[1])
		}
		slices.Sort(ls)
		documented[m[1]] = strings.Join(ls, ",")
	}
	if len(documented) < 20 {
		t.Fatalf("found only %d metric rows in docs/proxy.md: the pattern is broken", len(documented))
	}

	r := startRedis(t)
	text := strings.Replace(sharedText(r.URL(), "closed"), "    rate:", "    concurrency: {limit: 5}\n    rate:", 1)
	p := start(t, text, okUpstream(t))
	if resp, _ := get(t, client(t), clientReq(t, p.url, "alice")); resp.StatusCode != 200 {
		t.Fatalf("request through the shared policy: %d", resp.StatusCode)
	}
	exposed := map[string]string{}
	for name, f := range scrape(t, p) {
		if !strings.HasPrefix(name, "sluice_proxy_") && !strings.HasPrefix(name, "sluice_store_") {
			continue
		}
		ls := map[string]bool{}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				ls[l.GetName()] = true
			}
		}
		exposed[name] = strings.Join(slices.Sorted(maps.Keys(ls)), ",")
	}
	for name, ls := range exposed {
		if d, ok := documented[name]; !ok {
			t.Errorf("docs/proxy.md does not document %s{%s}", name, ls)
		} else if d != ls {
			t.Errorf("docs/proxy.md gives %s the labels %q, /metrics %q", name, d, ls)
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok {
			t.Errorf("docs/proxy.md documents %s, which /metrics does not expose", name)
		}
	}
}
