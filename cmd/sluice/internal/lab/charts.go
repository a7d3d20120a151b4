package lab

import (
	"math"
	"slices"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// chartRow is charts shown side by side: the real run's and the
// simulator's of the same figure, on one scale.
type chartRow struct {
	Caption string
	Charts  []chart
}

// experimentCharts draws an experiment: goodput, success latency and the
// limit over time, real beside simulated, and for seed 000 its figures
// against offered load.
func experimentCharts(x *ExperimentResult) []chartRow {
	var reps []side
	if x.Real != nil {
		reps = append(reps, side{"real sockets", x.Real})
	}
	if x.Sim != nil {
		reps = append(reps, side{"simulator", x.Sim})
	}
	if len(reps) == 0 {
		return nil
	}
	colours := map[string]string{}
	for i, p := range reps[len(reps)-1].r.Policies {
		colours[p.Name] = colour(i)
	}
	col := func(name string) string {
		if c, ok := colours[name]; ok {
			return c
		}
		return "#666666"
	}
	overTime := func(caption, ylabel string, logY bool, keep func(report.Policy) bool, f func(report.Point) float64, offered bool) chartRow {
		row := chartRow{Caption: caption}
		for _, s := range reps {
			c := chart{Title: caption + " — " + s.name, XLabel: "time (s)", YLabel: ylabel, LogY: logY}
			for _, p := range s.r.Policies {
				if !keep(p) {
					continue
				}
				l := line{Name: p.Name, Color: col(p.Name)}
				for _, pt := range p.Series {
					l.XY = append(l.XY, [2]float64{pt.TS, f(pt)})
				}
				c.Lines = append(c.Lines, l)
			}
			if offered && len(s.r.Policies) > 0 {
				l := line{Name: "offered", Color: "#999999", Dashed: true}
				for _, pt := range s.r.Policies[0].Series {
					l.XY = append(l.XY, [2]float64{pt.TS, pt.OfferedRPS})
				}
				c.Lines = append(c.Lines, l)
			}
			row.Charts = append(row.Charts, c)
		}
		shareY(row.Charts)
		return row
	}
	all := func(report.Policy) bool { return true }
	limited := func(p report.Policy) bool { return p.Kind == "concurrency" || p.Kind == "adaptive" }
	nanIfNone := func(f func(report.Point) float64) func(report.Point) float64 {
		return func(pt report.Point) float64 {
			if pt.GoodputRPS == 0 {
				return math.NaN()
			}
			return f(pt)
		}
	}
	rows := []chartRow{
		overTime("Goodput", "successes within timeout / s", false, all, goodput, true),
		overTime("Success latency p99", "ms (log)", true, all, nanIfNone(func(pt report.Point) float64 { return pt.P99Ms }), false),
	}
	if slices.ContainsFunc(reps[0].r.Policies, limited) {
		rows = append(rows, overTime("Concurrency limit", "requests in flight", false, limited, func(pt report.Point) float64 { return pt.Limit }, false))
	}
	if x.Curves {
		rows = append(rows, curves(reps, col)...)
	}
	return rows
}

// shareY gives charts side by side the same y scale.
func shareY(cs []chart) {
	if cs[0].LogY {
		return
	}
	m := 0.0
	for _, c := range cs {
		for _, l := range c.Lines {
			for _, p := range l.XY {
				if !math.IsNaN(p[1]) {
					m = math.Max(m, p[1])
				}
			}
		}
	}
	for i := range cs {
		cs[i].YMax = m
	}
}

// curveBin is the width, in rps, of the offered-load bins of seed 000's
// curves.
const curveBin = 50

// curves are seed 000's figures against offered load: success share and
// the successes' p50 and p99, from the series points binned by the rate
// offered in them.
func curves(reps []side, col func(string) string) []chartRow {
	share := chartRow{Caption: "Success rate against offered load"}
	lat := chartRow{Caption: "Success latency against offered load"}
	for _, s := range reps {
		cs := chart{Title: "Success rate — " + s.name, XLabel: "offered (rps)", YLabel: "% within timeout", YMax: 100}
		cl := chart{Title: "Success p50 (dashed), p99 — " + s.name, XLabel: "offered (rps)", YLabel: "ms (log)", LogY: true}
		for _, p := range s.r.Policies {
			type acc struct{ off, good, p50, p99, w float64 }
			bins := map[int]*acc{}
			for _, pt := range p.Series {
				if pt.OfferedRPS <= 0 {
					continue
				}
				k := int(pt.OfferedRPS / curveBin)
				a := bins[k]
				if a == nil {
					a = &acc{}
					bins[k] = a
				}
				a.off += pt.OfferedRPS
				a.good += pt.GoodputRPS
				if pt.GoodputRPS > 0 {
					a.p50 += pt.P50Ms * pt.GoodputRPS
					a.p99 += pt.P99Ms * pt.GoodputRPS
					a.w += pt.GoodputRPS
				}
			}
			keys := make([]int, 0, len(bins))
			for k := range bins {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			ls := line{Name: p.Name, Color: col(p.Name)}
			l50 := line{Name: p.Name + " p50", Color: col(p.Name), Dashed: true}
			l99 := line{Name: p.Name + " p99", Color: col(p.Name)}
			for _, k := range keys {
				a := bins[k]
				x := (float64(k) + 0.5) * curveBin
				ls.XY = append(ls.XY, [2]float64{x, math.Min(100, 100*a.good/a.off)})
				if a.w > 0 {
					l50.XY = append(l50.XY, [2]float64{x, a.p50 / a.w})
					l99.XY = append(l99.XY, [2]float64{x, a.p99 / a.w})
				}
			}
			cs.Lines = append(cs.Lines, ls)
			cl.Lines = append(cl.Lines, l50, l99)
		}
		share.Charts = append(share.Charts, cs)
		lat.Charts = append(lat.Charts, cl)
	}
	return []chartRow{share, lat}
}
