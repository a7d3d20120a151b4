package lab

import (
	_ "embed"
	"fmt"
	"github.com/sluicehq/sluice/cmd/sluice/internal/outfile"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

//go:embed report.html.tmpl
var reportTemplate string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":   fmtMs,
	"rps":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f%%", v) },
	"pp":   func(v float64) string { return fmt.Sprintf("%+.1f pp", v) },
	"mark": mark,
}).Parse(reportTemplate))

// view is what the template renders.
type view struct {
	*Result
	Held, Total int
	Sections    []section
}

type section struct {
	*ExperimentResult
	// ID is the section's anchor, unique in the page: two files of the
	// same base name make two experiments of the same name, and a name
	// could be the page's own id (selfcheck).
	ID     string
	Held   bool
	Rows   []summaryRow
	Charts []chartRow
	Legend []legendItem
}

type legendItem struct{ Name, Color string }

// summaryRow is one policy's headline figures, real beside simulated.
type summaryRow struct {
	Policy    string
	Sim, Real *report.Summary
}

// WriteHTML writes r as one self-contained HTML page: inline CSS and SVG,
// and a few lines of script that only check the page itself (every chart
// has data) and show it; nothing is fetched.
func WriteHTML(w io.Writer, r *Result) error {
	v := view{Result: r}
	ids := map[string]bool{}
	for i := range r.Experiments {
		x := &r.Experiments[i]
		s := section{ExperimentResult: x, ID: anchor(x.Name, ids), Held: x.Held(), Charts: experimentCharts(x)}
		for _, c := range x.Checks {
			v.Total++
			if c.Held {
				v.Held++
			}
		}
		for _, a := range x.Agreement {
			v.Total++
			if a.Held {
				v.Held++
			}
		}
		if x.Sim != nil {
			for j := range x.Sim.Policies {
				p := &x.Sim.Policies[j]
				row := summaryRow{Policy: p.Name, Sim: &p.Summary}
				if rp := policy(x.Real, p.Name); rp != nil {
					row.Real = &rp.Summary
				}
				s.Rows = append(s.Rows, row)
				s.Legend = append(s.Legend, legendItem{p.Name, colour(j)})
			}
		}
		v.Sections = append(v.Sections, s)
	}
	return page.Execute(w, v)
}

// anchor returns an id for an experiment named name that is not in used,
// and adds it: "x-" and the name's letters, digits, '-' and '_' (an id
// holds no space, and a link to it is not escaped), numbered from the
// second of a name on.
func anchor(name string, used map[string]bool) string {
	base := "x-" + strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, name)
	id := base
	for n := 2; used[id]; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	used[id] = true
	return id
}

// reportFiles are the names WriteFiles writes in its directory.
var reportFiles = []string{"lab.html", "lab.json"}

// CheckFiles checks that WriteFiles could write its files into dir, which
// exists, and leaves dir as it was: a report that cannot be written is
// found before the run, not after it.
func CheckFiles(dir string) error {
	for _, name := range reportFiles {
		f, err := outfile.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		f.Discard()
	}
	return nil
}

// WriteFiles writes the HTML report and its JSON twin into dir and returns
// the HTML file's path. Each is written beside its path and put there once
// both are complete (outfile): a failed write (a full disk, a value JSON
// cannot hold) leaves the previous report as it was, not a page cut short.
func WriteFiles(dir string, r *Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	htmlPath := filepath.Join(dir, reportFiles[0])
	files := []struct {
		path  string
		write func(io.Writer, *Result) error
		f     *outfile.File
	}{{path: htmlPath, write: WriteHTML}, {path: filepath.Join(dir, reportFiles[1]), write: WriteJSON}}
	defer func() {
		for _, f := range files {
			if f.f != nil {
				f.f.Discard() // not committed: an error came first
			}
		}
	}()
	for i := range files {
		f := &files[i]
		var err error
		if f.f, err = outfile.Create(f.path); err == nil {
			err = f.write(f.f, r)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.path, err)
		}
	}
	for i := range files {
		f := &files[i]
		err := f.f.Commit()
		f.f = nil
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.path, err)
		}
	}
	return htmlPath, nil
}

func mark(held bool) template.HTML {
	if held {
		return `<span class="ok">✓ held</span>`
	}
	return `<span class="bad">✗ not held</span>`
}

func fmtMs(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 1:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f µs", v*1000)
}
