package outfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCommitWritesThroughDanglingLink: a link to a file not written yet
// (out.csv -> results/run.csv) is written through, as os.Create does: the
// file is made at the link's target and the link stays. The link was
// replaced by the file, and the target never written.
func TestCommitWritesThroughDanglingLink(t *testing.T) {
	dir := t.TempDir()
	link, target := filepath.Join(dir, "out.csv"), filepath.Join(dir, "run.csv")
	if err := os.Symlink("run.csv", link); err != nil {
		t.Fatal(err)
	}
	f, err := Create(link)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Discard()
	if _, err := f.WriteString("data\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer a link: %v, %v", link, fi.Mode(), err)
	}
	if b, err := os.ReadFile(target); string(b) != "data\n" {
		t.Errorf("the link's target holds %q, %v; want the file written", b, err)
	}
}
