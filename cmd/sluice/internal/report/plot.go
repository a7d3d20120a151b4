package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrPlotFormat is returned for a plot file whose extension is neither .svg
// nor .png.
var ErrPlotFormat = errors.New("plot file must end in .svg or .png")

// PlotFormat returns "svg" or "png" from a file name's extension, so that a
// command can reject a bad name before it runs anything.
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	}
	return "", fmt.Errorf("%w: %q", ErrPlotFormat, path)
}

// PlotFile draws r into the file at path, as SVG or PNG by its extension.
func PlotFile(path string, r *Report) error {
	format, err := PlotFormat(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Plot(f, format, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Plot size: three panels stacked, readable on a laptop screen, with one
// legend for all of them in a strip on the right.
const (
	plotWidth   = 10 * vg.Inch
	plotHeight  = 10 * vg.Inch
	legendWidth = 1.7 * vg.Inch
	plotDPI     = 100
)

// Plot draws r as three panels over time, one colour per policy: goodput
// (with the offered load in grey), the latency of successes (p99 solid, p50
// dashed), and the concurrency limit (solid) with the requests in flight
// (dashed) of the policies that limit concurrency. format is "svg" or "png".
func Plot(w io.Writer, format string, r *Report) error {
	panels := [][]*plot.Plot{{goodputPanel(r)}, {latencyPanel(r)}, {limitPanel(r)}}
	for _, row := range panels {
		p := row[0]
		p.X.Label.Text = "time (s)"
		p.X.Min = 0
		p.Add(plotter.NewGrid())
	}
	var (
		canvas vg.CanvasWriterTo
		dc     draw.Canvas
	)
	switch format {
	case "svg":
		c := vgsvg.New(plotWidth, plotHeight)
		canvas, dc = c, draw.New(c)
		// SVG is transparent by default: black text vanishes on a dark
		// viewer.
		dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: plotWidth, Y: 0}, {X: plotWidth, Y: plotHeight}, {X: 0, Y: plotHeight}})
	case "png":
		c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI),
			vgimg.UseBackgroundColor(color.White))
		canvas, dc = vgimg.PngCanvas{Canvas: c}, draw.New(c)
	default:
		return fmt.Errorf("%w: format %q", ErrPlotFormat, format)
	}
	left := draw.Crop(dc, 0, -legendWidth, 0, 0)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(14)}
	for i, row := range plot.Align(panels, tiles, left) {
		panels[i][0].Draw(row[0])
	}
	l := legend(r)
	l.Draw(draw.Crop(dc, plotWidth-legendWidth+vg.Points(6), 0, 0, -vg.Points(24)))
	_, err := canvas.WriteTo(w)
	return err
}

// legend names the policies' colours once for the three panels.
func legend(r *Report) plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.ThumbnailWidth = 0.35 * vg.Inch
	l.TextStyle.Font.Size = vg.Points(11)
	for i, pol := range r.Policies {
		l.Add(Printable(pol.Name), lineStyle(policyColor(i), nil))
	}
	l.Add("offered load", lineStyle(grey, dashed))
	return l
}

func lineStyle(c color.Color, dashes []vg.Length) *plotter.Line {
	l := &plotter.Line{}
	l.Color = c
	l.Width = vg.Points(1.5)
	l.Dashes = dashes
	return l
}

func goodputPanel(r *Report) *plot.Plot {
	p := plot.New()
	k := smoothing(r)
	p.Title.Text = fmt.Sprintf("%s: goodput (successes within the client timeout)", Printable(r.Scenario))
	if k > 1 {
		p.Title.Text += fmt.Sprintf(", %s moving average", fmtSeconds(float64(k)*r.IntervalS))
	}
	p.Y.Min = 0
	p.Y.Label.Text = "requests/s"
	if len(r.Policies) > 0 {
		offered := series(r.Policies[0].Series, func(pt Point) (float64, bool) { return pt.OfferedRPS, true })
		addLines(p, movingAverage(offered, k), grey, dashed)
	}
	for i, pol := range r.Policies {
		s := series(pol.Series, func(pt Point) (float64, bool) { return pt.GoodputRPS, true })
		addLines(p, movingAverage(s, k), policyColor(i), nil)
	}
	return p
}

// smoothing is how many intervals the goodput panel averages over: about a
// fiftieth of the run. Per-interval counts of slow requests jump between
// whole numbers (with 2 s of work, 1 s intervals see 1, 5, 2, 4 successes),
// which draws a band of zigzags that hides the level; the table and the JSON
// keep the raw series.
func smoothing(r *Report) int {
	if r.IntervalS <= 0 {
		return 1
	}
	return max(1, int(r.DurationS/r.IntervalS/50))
}

// movingAverage replaces each point of every segment by the mean of it and
// the k-1 points before it in the same segment.
func movingAverage(segs []plotter.XYs, k int) []plotter.XYs {
	if k <= 1 {
		return segs
	}
	out := make([]plotter.XYs, len(segs))
	for i, seg := range segs {
		avg := make(plotter.XYs, len(seg))
		sum := 0.0
		for j, pt := range seg {
			sum += pt.Y
			if j >= k {
				sum -= seg[j-k].Y
			}
			avg[j] = plotter.XY{X: pt.X, Y: sum / float64(min(j+1, k))}
		}
		out[i] = avg
	}
	return out
}

func latencyPanel(r *Report) *plot.Plot {
	p := plot.New()
	p.Title.Text = "latency of successes (solid p99, dashed p50; log scale)"
	p.Y.Label.Text = "ms"
	// Log scale: a queue's seconds and a protected service's milliseconds
	// both stay readable in one panel.
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	lines := 0
	for i, pol := range r.Policies {
		// An interval without a success has no latency: leave a gap
		// rather than draw a misleading zero.
		// A log scale has no zero either.
		p99 := series(pol.Series, func(pt Point) (float64, bool) { return pt.P99Ms, pt.P99Ms > 0 })
		p50 := series(pol.Series, func(pt Point) (float64, bool) { return pt.P50Ms, pt.P50Ms > 0 })
		lines += addLines(p, p99, policyColor(i), nil)
		lines += addLines(p, p50, policyColor(i), dashed)
	}
	if lines == 0 {
		// Not one success (every request timed out): an empty axis
		// would default to [-1, 1], which a log scale cannot draw.
		p.Title.Text += ": no successes"
		p.Y.Min, p.Y.Max = 1, 1000
	}
	// Widen the axis out to labelled ticks (1, 2, 5 × 10^n), so that even a
	// narrow range such as 1.0-2.4 s reads 1000 at the bottom and 5000 at
	// the top, not one lonely label.
	p.Y.Min, p.Y.Max = niceBelow(p.Y.Min), niceAbove(p.Y.Max)
	if p.Y.Min == p.Y.Max {
		// Every latency was the same tick value (a constant 1 ms
		// service): gonum widens an empty range by ±1, which is <= 0 for
		// a value of 1 or less and panics on a log scale. Widen it by a
		// factor instead, to the ticks either side, which stay > 0.
		p.Y.Min, p.Y.Max = niceBelow(p.Y.Min/2), niceAbove(p.Y.Max*2)
	}
	return p
}

// niceBelow returns the largest of 1, 2, 5 × 10^n at most v (v > 0).
func niceBelow(v float64) float64 {
	if !(v > 0) {
		return v
	}
	pow := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*pow <= v {
			return m * pow
		}
	}
	return pow
}

// niceAbove returns the smallest of 1, 2, 5 × 10^n at least v (v > 0).
func niceAbove(v float64) float64 {
	if !(v > 0) {
		return v
	}
	pow := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= v {
			return m * pow
		}
	}
	return 10 * pow
}

func limitPanel(r *Report) *plot.Plot {
	p := plot.New()
	p.Title.Text = "concurrency limit (solid) and requests in flight (dashed)"
	p.Y.Min = 0
	p.Y.Label.Text = "requests"
	for i, pol := range r.Policies {
		// A rate limit's limit is per second and no policy's in-flight
		// count is bounded: drawing them here would squash the lines
		// that are about concurrency.
		if !limitsConcurrency(pol.Kind) {
			continue
		}
		limit := series(pol.Series, func(pt Point) (float64, bool) { return pt.Limit, pt.Limit > 0 })
		inFlight := series(pol.Series, func(pt Point) (float64, bool) { return float64(pt.InFlight), true })
		addLines(p, limit, policyColor(i), nil)
		addLines(p, inFlight, policyColor(i), dashed)
	}
	return p
}

// limitsConcurrency reports whether a policy kind has a concurrency limit.
func limitsConcurrency(kind string) bool { return kind == "concurrency" || kind == "adaptive" }

// palette is Tableau 10 without its grey (the offered load's colour): ten
// colours told apart at a glance, also by most colour-blind readers.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0x20, 0x20, 0x20, 0xff},
}

func policyColor(i int) color.Color { return palette[i%len(palette)] }

// logTicks marks a log axis at 1, 2 and 5 times each power of ten, labelled,
// so that a range within one decade still has numbers on it.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi > lo) {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		pow := math.Pow(10, e)
		for _, m := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9} {
			v := m * pow
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

var (
	grey   = color.Gray{Y: 150}
	dashed = []vg.Length{vg.Points(5), vg.Points(3)}
)

// series returns the runs of consecutive points for which get reports a
// value: one segment per unbroken run.
func series(pts []Point, get func(Point) (float64, bool)) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, pt := range pts {
		v, ok := get(pt)
		if !ok {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: pt.TS, Y: v})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// addLines draws each segment as a line of one style and returns how many
// it drew.
func addLines(p *plot.Plot, segs []plotter.XYs, c color.Color, dashes []vg.Length) int {
	n := 0
	for _, seg := range segs {
		l, err := plotter.NewLine(seg)
		if err != nil {
			continue // a NaN or Inf point: skip the segment rather than fail the plot
		}
		l.LineStyle = lineStyle(c, dashes).LineStyle
		p.Add(l)
		n++
	}
	return n
}
