package lab

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// line is one series of a chart.
type line struct {
	Name   string
	Color  string
	Dashed bool
	XY     [][2]float64
}

// chart is a line chart drawn as inline SVG: no script, no font or file
// from the network, so the report opens offline and prints.
type chart struct {
	Title          string
	XLabel, YLabel string
	Lines          []line
	// YMax, when > 0, fixes the y axis, so that a real and a simulated
	// chart side by side share a scale.
	YMax float64
	// LogY draws y on a log scale (latencies spanning µs to seconds).
	LogY bool
}

// palette is one colour per policy, readable on white and told apart by
// most colour-blind readers (Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

func colour(i int) string { return palette[i%len(palette)] }

const (
	svgW, svgH                     = 460, 260
	padL, padR, padT, padB float64 = 56, 12, 26, 40
)

// points counts the chart's drawable points, the figure the report's
// self-check reads.
func (c chart) points() int {
	n := 0
	for _, l := range c.Lines {
		for _, p := range l.XY {
			if !math.IsNaN(p[1]) {
				n++
			}
		}
	}
	return n
}

// SVG renders the chart.
func (c chart) SVG() template.HTML {
	xmax, ymax, ymin := 0.0, c.YMax, math.Inf(1)
	for _, l := range c.Lines {
		for _, p := range l.XY {
			xmax = math.Max(xmax, p[0])
			if c.YMax == 0 && !math.IsNaN(p[1]) {
				ymax = math.Max(ymax, p[1])
			}
			if !math.IsNaN(p[1]) && p[1] > 0 {
				ymin = math.Min(ymin, p[1])
			}
		}
	}
	if xmax <= 0 {
		xmax = 1
	}
	if ymax <= 0 {
		ymax = 1
	}
	xticks := ticks(xmax)
	xmax = xticks[len(xticks)-1]
	var yticks []float64
	var ylo float64
	if c.LogY {
		if math.IsInf(ymin, 1) {
			ymin = ymax / 10
		}
		lo := math.Floor(math.Log10(ymin))
		hi := math.Ceil(math.Log10(ymax))
		if hi <= lo {
			hi = lo + 1
		}
		for e := lo; e <= hi; e++ {
			yticks = append(yticks, math.Pow(10, e))
		}
		ylo, ymax = math.Pow(10, lo), math.Pow(10, hi)
	} else {
		yticks = ticks(ymax)
		ymax = yticks[len(yticks)-1]
	}
	pw, ph := svgW-padL-padR, svgH-padT-padB
	sx := func(x float64) float64 { return padL + pw*x/xmax }
	sy := func(y float64) float64 {
		if c.LogY {
			if y <= ylo {
				y = ylo
			}
			return padT + ph*(1-(math.Log10(y)-math.Log10(ylo))/(math.Log10(ymax)-math.Log10(ylo)))
		}
		return padT + ph*(1-y/ymax)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-points="%d" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		c.points(), svgW, svgH, svgW, svgH, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%g" y="16" class="title">%s</text>`, padL, template.HTMLEscapeString(c.Title))
	for _, t := range yticks {
		y := sy(t)
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="tick" text-anchor="end">%s</text>`,
			padL, padL+pw, y, y, padL-4, y+3, fmtTick(t))
	}
	for _, t := range xticks {
		x := sx(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="grid"/><text x="%.1f" y="%g" class="tick" text-anchor="middle">%s</text>`,
			x, x, padT, padT+ph, x, padT+ph+13, fmtTick(t))
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" class="frame"/>`, padL, padT, pw, ph)
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="axis" text-anchor="middle">%s</text>`, padL+pw/2, float64(svgH)-6, template.HTMLEscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(12 %g) rotate(-90)" class="axis" text-anchor="middle">%s</text>`, padT+ph/2, template.HTMLEscapeString(c.YLabel))
	for _, l := range c.Lines {
		var pts strings.Builder
		for _, p := range l.XY {
			if math.IsNaN(p[1]) || (c.LogY && p[1] <= 0) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", sx(p[0]), sy(math.Min(p[1], ymax)))
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" points="%s" stroke="%s"%s fill="none" stroke-width="1.6"/>`,
			template.HTMLEscapeString(l.Name), strings.TrimSpace(pts.String()), l.Color, dash)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// ticks returns 4-6 round tick values from 0 to at least max.
func ticks(max float64) []float64 {
	step := math.Pow(10, math.Floor(math.Log10(max)))
	for _, m := range []float64{1, 2, 5, 10} {
		if max/(step*m) <= 6 {
			step *= m
			break
		}
	}
	var out []float64
	for v := 0.0; ; v += step {
		out = append(out, v)
		if v >= max-1e-9 {
			return out
		}
	}
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case math.Abs(v) < 1:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
