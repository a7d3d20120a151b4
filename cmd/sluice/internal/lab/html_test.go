package lab

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestWriteFilesKeepsOldReportOnFailure: a report that cannot be written
// (here JSON cannot hold its NaN) leaves the previous lab.html and
// lab.json as they were, and no temporary file beside them.
func TestWriteFilesKeepsOldReportOnFailure(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteFiles(dir, &Result{Version: Version, CPU: "first", ElapsedS: 1}); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, name := range []string{"lab.html", "lab.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = b
	}
	if _, err := WriteFiles(dir, &Result{Version: Version, CPU: "second", ElapsedS: math.NaN()}); err == nil {
		t.Fatal("a NaN was written as JSON")
	}
	for name, want := range before {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s changed by the failed write (err %v):\n%s", name, err, got)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want lab.html and lab.json alone", names)
	}
	if fi, err := os.Stat(filepath.Join(dir, "lab.html")); err != nil || fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("lab.html: %v, %v: want it readable by all, as before", fi.Mode(), err)
	}
}

// TestWriteHTMLAnchorsAreUnique: every id of the page is its own and every
// link of the contents finds its section, even for two files of the same
// base name (two experiments of one name) and a name that is the page's
// own id.
func TestWriteHTMLAnchorsAreUnique(t *testing.T) {
	r := &Result{Experiments: []ExperimentResult{{Name: "w"}, {Name: "w"}, {Name: "selfcheck"}, {Name: "a b"}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(` id="([^"]*)"`).FindAllStringSubmatch(b.String(), -1) {
		if ids[m[1]] {
			t.Errorf("id %q is on the page twice", m[1])
		}
		ids[m[1]] = true
	}
	links := regexp.MustCompile(` href="#([^"]*)"`).FindAllStringSubmatch(b.String(), -1)
	if len(links) != len(r.Experiments) {
		t.Fatalf("%d links in the contents, want %d", len(links), len(r.Experiments))
	}
	for _, m := range links {
		if !ids[m[1]] {
			t.Errorf("the link to #%s finds no section", m[1])
		}
	}
}
