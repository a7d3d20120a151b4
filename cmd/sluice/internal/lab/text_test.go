package lab

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// TestWriteTextQuotesNames: a name from a file with a terminal escape or a
// bidirectional-text control is written quoted, as sluice sim's table
// writes it, in the summary and in -json, never raw.
func TestWriteTextQuotesNames(t *testing.T) {
	name := "p\x1b[2J\u202e1"
	pol := report.Policy{Name: name}
	r := &Result{Experiments: []ExperimentResult{{
		Name: "x\x1b]0;title\a", Title: "t", Error: "real run: " + name + ": failed",
		Sim:  &report.Report{Policies: []report.Policy{pol}},
		Real: &report.Report{Policies: []report.Policy{pol}},
	}}}
	var text, js bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"summary": text.String(), "json": js.String()} {
		if strings.ContainsAny(out, "\x1b\a\u202e") {
			t.Errorf("%s holds a raw control:\n%q", what, out)
		}
	}
	if want := report.Printable(name); !strings.Contains(text.String(), "  "+want+" ") {
		t.Errorf("summary lacks the policy as %s:\n%s", want, text.String())
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Experiments[0].Sim.Policies[0].Name != name {
		t.Errorf("the JSON does not decode to the names: %v", err)
	}
}
