package load

import (
	"strings"
	"testing"
)

// TestWriteTextCounts: the status, reasons and errors lines list their
// counts by key, sorted; a rejection without a reason header is "(none)";
// an empty map writes no line.
func TestWriteTextCounts(t *testing.T) {
	r := &Result{
		Status:  map[int]int64{503: 2, 200: 3},
		Reasons: map[string]int64{"limit": 2, "": 1},
		Errors:  map[string]int64{"timeout": 4, "refused": 1},
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nstatus      200: 3 503: 2\n",
		"\nreasons     (none): 1 limit: 2\n",
		"\nerrors      refused: 1 timeout: 4\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	r.Errors = nil
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "errors") {
		t.Errorf("no errors, yet an errors line:\n%s", b.String())
	}
}
