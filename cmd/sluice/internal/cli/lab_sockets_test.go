package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabSocketLimits: a file the simulator runs but sockets cannot (200,000
// origin workers) is bad input for the lab, exit 2 at the field's line
// before anything runs; with -sim-only it runs.
func TestLabSocketLimits(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "big.yaml")
	src := "duration: 1s\norigin:\n  workers: 200000\n  service: {kind: constant, mean: 10ms}\nload: {rate: 10}\npolicies: [{name: p1, kind: none}]\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := run("lab", "-out", out, file)
	want := file + ":3: origin.workers: on sockets, must be at most 100000, got 200000"
	if code != ExitUsage || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("exit %d, want %d with %q; stdout:\n%s\nstderr:\n%s", code, ExitUsage, want, stdout, stderr)
	}
	if code, _, stderr := run("lab", "-sim-only", "-out", out, file); code != ExitOK {
		t.Errorf("-sim-only: exit %d, stderr:\n%s", code, stderr)
	}
}
