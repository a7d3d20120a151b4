package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProxyCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("routes:\n  - name: a\n    upstream: http://127.0.0.1:9000\n"), 0o600)
	os.WriteFile(bad, []byte("routes:\n  - name: a\n    upstream: http://127.0.0.1:9000\n    polcy: x\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"proxy", "-check", "-config", good}, ExitOK, "ok (1 routes, 0 policies)"},
		{[]string{"proxy", "-check", "-config", bad}, ExitUsage, "bad.yaml:4: routes[0].polcy: unknown key"},
		{[]string{"proxy", "-check", "-config", filepath.Join(dir, "missing.yaml")}, ExitUsage, "no such file"},
		{[]string{"proxy", "-check", "-nope"}, ExitUsage, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		code := Main(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("%q: exit %d, output %q%q; want %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}
