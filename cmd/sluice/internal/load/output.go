package load

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes r as indented JSON. Durations are in nanoseconds.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteSeries writes r.Series as CSV, one row per interval, with a header:
// t_s, offered, sent, goodput, throughput, rejects, failures, timeouts
// (per second), skipped, late (counts), p50_ms, p95_ms, p99_ms.
func (r *Result) WriteSeries(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"t_s", "offered", "sent", "goodput", "throughput", "rejects", "failures", "timeouts", "skipped", "late", "p50_ms", "p95_ms", "p99_ms"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, p := range r.Series {
		_ = cw.Write([]string{f(p.T.Seconds()), f(p.Offered), f(p.Sent), f(p.Goodput), f(p.Throughput),
			f(p.Rejects), f(p.Failures), f(p.Timeouts), strconv.FormatInt(p.Skipped, 10), strconv.FormatInt(p.Late, 10),
			f(ms(p.P50)), f(ms(p.P95)), f(ms(p.P99))})
	}
	cw.Flush()
	return cw.Error()
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteText writes a summary for a person: the goodput first, then whether
// the schedule was kept, the answers, and the latencies.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	window := r.Duration - r.Warmup
	fmt.Fprintf(&b, "%s: %v", r.URL, window)
	if r.Warmup > 0 {
		fmt.Fprintf(&b, " (after %v warm-up)", r.Warmup)
	}
	if r.Interrupted {
		b.WriteString(" INTERRUPTED")
		if r.Stopped > 0 {
			fmt.Fprintf(&b, " at %v (rates over the part run)", r.Stopped)
		}
	}
	b.WriteString("\n\n")
	timeout := "no timeout"
	if r.Timeout > 0 {
		timeout = "within " + r.Timeout.String()
	}
	fmt.Fprintf(&b, "goodput     %.1f/s  (2xx %s)\n", r.Goodput, timeout)
	fmt.Fprintf(&b, "offered     %.1f/s  (%d planned, %d sent)\n", r.Offered, r.Planned, r.Sent)
	fmt.Fprintf(&b, "throughput  %.1f/s  (responses completed in the window)\n", r.Throughput)
	switch {
	case r.Skipped > 0 || r.Late > 0:
		fmt.Fprintf(&b, "schedule    NOT KEPT: %d skipped, %d late by more than %v (%.2f%%); send lag p99 %v, max %v\n",
			r.Skipped, r.Late, r.LateAfter, pct(r.Skipped+r.Late, r.Planned), r.SendLag.P99, r.SendLag.Max)
	default:
		fmt.Fprintf(&b, "schedule    kept: send lag p99 %v, max %v\n", r.SendLag.P99, r.SendLag.Max)
	}
	fmt.Fprintf(&b, "answers     %d 2xx (%d good), %d rejected, %d failed", r.OK, r.Good, r.Rejected, r.Failed)
	if r.Unfinished > 0 {
		fmt.Fprintf(&b, ", %d unfinished", r.Unfinished)
	}
	b.WriteString("\n")
	writeCounts(&b, "status     ", r.Status, "")
	writeCounts(&b, "reasons    ", r.Reasons, "(none)") // "": rejected without a reason header
	writeCounts(&b, "errors     ", r.Errors, "")
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tcount\tp50\tp90\tp95\tp99\tp99.9\tmax\t")
	for _, row := range []struct {
		name string
		p    Percentiles
	}{{"all", r.Latency}, {"2xx", r.Success}, {"rejected", r.Rejection}, {"failed", r.Failure}} {
		p := row.p
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%v\t%v\t%v\t\n", row.name, p.Count,
			round(p.P50), round(p.P90), round(p.P95), round(p.P99), round(p.P999), round(p.Max))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// round keeps three significant digits, as HdrHistogram measured them.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// writeCounts writes one line of label and m's counts by key, sorted;
// none names the empty key. An empty m writes nothing.
func writeCounts[K cmp.Ordered](b *strings.Builder, label string, m map[K]int64, none string) {
	if len(m) == 0 {
		return
	}
	b.WriteString(label)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := fmt.Sprint(k)
		if name == "" && none != "" {
			name = none
		}
		fmt.Fprintf(b, " %s: %d", name, m[k])
	}
	b.WriteString("\n")
}
