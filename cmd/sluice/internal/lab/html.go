package lab

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"

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
	for i := range r.Experiments {
		x := &r.Experiments[i]
		s := section{ExperimentResult: x, Held: x.Held(), Charts: experimentCharts(x)}
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

// WriteFiles writes the HTML report and its JSON twin into dir and returns
// the HTML file's path.
func WriteFiles(dir string, r *Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	htmlPath := filepath.Join(dir, "lab.html")
	for _, f := range []struct {
		path  string
		write func(io.Writer, *Result) error
	}{{htmlPath, WriteHTML}, {filepath.Join(dir, "lab.json"), WriteJSON}} {
		out, err := os.Create(f.path)
		if err != nil {
			return "", err
		}
		if err := f.write(out, r); err != nil {
			out.Close()
			return "", fmt.Errorf("%s: %w", f.path, err)
		}
		if err := out.Close(); err != nil {
			return "", err
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
