package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sluicehq/sluice/sim"
	"gonum.org/v1/plot/vg"
)

// sample is a small two-policy report with a gap in one policy's latency.
func sample() *Report {
	r := &Report{
		Version: Version, Scenario: "demo", File: "scenarios/demo.yaml", Seed: 7,
		DurationS: 4, IntervalS: 1,
	}
	none := Policy{Name: "none", Kind: "none", Summary: Summary{
		OfferedRPS: 5, GoodputRPS: 0.25, ThroughputRPS: 3.5, CapacityRPS: 3.5, GoodputPct: 7.14,
		DemandRPS: 5, AchievableRPS: 3.5, GoodputPctOfAchievable: 7.14, MeanLatencyMs: 2400, MeanWaitMs: 400,
		Sent: 20, Successes: 1, Timeouts: 19, Wasted: 12, Rejected: map[string]int64{},
		Success: Latency{Count: 1, P50: 2400, P99: 2400, P999: 2400, Max: 2400},
	}}
	limited := Policy{Name: "static-5", Kind: "concurrency", Summary: Summary{
		OfferedRPS: 5, GoodputRPS: 2.5, ThroughputRPS: 2.5, CapacityRPS: 3.5, GoodputPct: 71.4,
		DemandRPS: 5, AchievableRPS: 3.5, GoodputPctOfAchievable: 71.4, MeanLatencyMs: 2003, MeanWaitMs: 2.5,
		Sent: 20, Successes: 10, Refused: 1, Rejected: map[string]int64{"limit": 9, "queue_full": 1}, RejectedTotal: 10,
		Success:   Latency{Count: 10, P50: 2000, P99: 2010, P999: 2010, Max: 2010},
		Rejection: Latency{Count: 10, P50: 0.001, P99: 0.004, P999: 0.004, Max: 0.004},
	}}
	for i := 1; i <= 4; i++ {
		t := float64(i)
		p := Point{TS: t, OfferedRPS: 5, ThroughputRPS: 3.5, InFlight: 9}
		if i == 4 {
			p.GoodputRPS, p.P50Ms, p.P99Ms = 1, 2400, 2400
		}
		none.Series = append(none.Series, p)
		limited.Series = append(limited.Series, Point{TS: t, OfferedRPS: 5, GoodputRPS: 2.5, ThroughputRPS: 2.5,
			RejectedRPS: 2.5, RejectedByRPS: map[string]float64{"limit": 2.5}, P50Ms: 2000, P99Ms: 2010, Limit: 5, InFlight: 5})
	}
	r.Policies = []Policy{none, limited}
	return r
}

func TestJSONRoundTrip(t *testing.T) {
	r := sample()
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("decode: %v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(r, &back) {
		t.Errorf("round trip changed the report:\n got %+v\nwant %+v", back, *r)
	}
}

// TestJSONFieldNames pins the documented field names: renaming one breaks
// every script that reads the JSON.
func TestJSONFieldNames(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "scenario", "file", "seed", "duration_s", "interval_s", "policies"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("top level: no %q", k)
		}
	}
	pol := doc["policies"].([]any)[1].(map[string]any)
	for _, k := range []string{"name", "kind", "summary", "series"} {
		if _, ok := pol[k]; !ok {
			t.Errorf("policy: no %q", k)
		}
	}
	sum := pol["summary"].(map[string]any)
	for _, k := range []string{"offered_rps", "goodput_rps", "throughput_rps", "capacity_rps",
		"goodput_pct_of_capacity", "sent", "unsent", "successes", "failed", "timeouts", "refused",
		"origin_timeouts", "retries", "wasted", "rejected", "rejected_total",
		"success_latency_ms", "rejection_latency_ms", "wait_ms",
		"demand_rps", "achievable_rps", "goodput_pct_of_achievable", "mean_latency_ms", "mean_wait_ms"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary: no %q", k)
		}
	}
	lat := sum["success_latency_ms"].(map[string]any)
	for _, k := range []string{"count", "p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("success_latency_ms: no %q", k)
		}
	}
	if got := sum["rejected"].(map[string]any)["limit"]; got != 9.0 {
		t.Errorf("rejected.limit = %v, want 9", got)
	}
	pt := pol["series"].([]any)[0].(map[string]any)
	for _, k := range []string{"t_s", "offered_rps", "goodput_rps", "throughput_rps", "rejected_rps",
		"timeouts_rps", "capacity_rps", "demand_rps", "p50_ms", "p99_ms", "limit", "in_flight", "queued",
		"origin_busy", "origin_queue"} {
		if _, ok := pt[k]; !ok {
			t.Errorf("series point: no %q", k)
		}
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := Table(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 { // title, blank, header, two policies
		t.Fatalf("want 5 lines, got %d:\n%s", len(lines), out)
	}
	for _, want := range []string{
		"scenario demo: 4s simulated, seed 7, capacity 3.50 rps, demand 5.00 rps: achievable 3.50 rps",
		"POLICY", "GOODPUT/s", "REJ p99",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, row := range []struct {
		line   int
		fields []string
	}{
		{3, []string{"none", "5.00", "0.25", "7%", "3.50", "2.40s", "2.40s", "2.40s", "19", "0", "0", "-"}},
		{4, []string{"static-5", "5.00", "2.50", "71%", "2.50", "2.00s", "2.01s", "2.01s", "0", "1", "10", "(limit", "9,", "queue_full", "1)", "4.00µs"}},
	} {
		if got := strings.Fields(lines[row.line]); !reflect.DeepEqual(got, row.fields) {
			t.Errorf("row %d:\n got %q\nwant %q", row.line, got, row.fields)
		}
	}
}

func TestFmtLatency(t *testing.T) {
	for _, tc := range []struct {
		ms    float64
		count int64
		want  string
	}{
		{0, 0, "-"},
		{0, 1, "0µs"},
		{2500, 1, "2.50s"},
		{12345, 1, "12.3s"},
		{275, 1, "275ms"},
		{25.04, 1, "25.0ms"},
		{1, 1, "1.00ms"},
		{0.41, 1, "0.410ms"},
		{0.012, 1, "12.0µs"},
	} {
		if got := fmtLatency(tc.ms, tc.count); got != tc.want {
			t.Errorf("fmtLatency(%v, %d) = %q, want %q", tc.ms, tc.count, got, tc.want)
		}
	}
}

func TestPlotFormat(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		bad        bool
	}{
		{"out.svg", "svg", false},
		{"dir/OUT.PNG", "png", false},
		{"out.pdf", "", true},
		{"out", "", true},
	} {
		got, err := PlotFormat(tc.path)
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("PlotFormat(%q) = %q, %v", tc.path, got, err)
		}
		if tc.bad && !errors.Is(err, ErrPlotFormat) {
			t.Errorf("PlotFormat(%q) error %v is not ErrPlotFormat", tc.path, err)
		}
	}
}

func TestPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.png")
	if err := PlotFile(path, sample()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != int(float64(plotWidth/vg.Inch)*plotDPI) || b.Dy() != int(float64(plotHeight/vg.Inch)*plotDPI) {
		t.Errorf("PNG is %dx%d", b.Dx(), b.Dy())
	}
}

func TestPlotSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := Plot(&buf, "svg", sample()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "<?xml") || !strings.Contains(out, "<svg") || !strings.HasSuffix(strings.TrimSpace(out), "</svg>") {
		t.Errorf("not an SVG document: %.200s", out)
	}
	for _, want := range []string{"static-5", "goodput", "limit", `style="fill:#FFFFFF"`} {
		if !strings.Contains(out, want) {
			t.Errorf("SVG lacks the text %q", want)
		}
	}
}

func TestPlotBadFormat(t *testing.T) {
	if err := Plot(&bytes.Buffer{}, "pdf", sample()); !errors.Is(err, ErrPlotFormat) {
		t.Errorf("Plot(pdf) = %v, want ErrPlotFormat", err)
	}
	if err := PlotFile(filepath.Join(t.TempDir(), "x.gif"), sample()); !errors.Is(err, ErrPlotFormat) {
		t.Errorf("PlotFile(x.gif) = %v, want ErrPlotFormat", err)
	}
}

// TestPlotNoSuccesses: a run in which nothing succeeded (every request
// timed out), or that has no points at all, still draws: the latency
// panel's log scale panicked on its empty default range.
func TestPlotNoSuccesses(t *testing.T) {
	failed := sample()
	for i := range failed.Policies {
		for j := range failed.Policies[i].Series {
			failed.Policies[i].Series[j].P50Ms, failed.Policies[i].Series[j].P99Ms = 0, 0
		}
	}
	empty := sample()
	for i := range empty.Policies {
		empty.Policies[i].Series = nil
	}
	for name, r := range map[string]*Report{"no successes": failed, "no points": empty, "no policies": {Scenario: "x"}} {
		for _, format := range []string{"svg", "png"} {
			if err := Plot(&bytes.Buffer{}, format, r); err != nil {
				t.Errorf("%s, %s: %v", name, format, err)
			}
		}
	}
}

func TestTableWithin(t *testing.T) {
	r := sample()
	r.Policies[0].Summary.Within = &Within{BoundMs: 1000, Successes: 0, Admitted: 3}
	r.Policies[1].Summary.Within = &Within{BoundMs: 1000, Successes: 4, Admitted: 10}
	var buf bytes.Buffer
	if err := Table(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if !strings.HasSuffix(strings.TrimSpace(lines[2]), "OK<=1s  ADMIT<=1s") {
		t.Errorf("header lacks the within columns: %q", lines[2])
	}
	if f := strings.Fields(lines[4]); f[len(f)-2] != "4" || f[len(f)-1] != "10" {
		t.Errorf("static-5 within columns: %q", f)
	}
}

func TestFromSim(t *testing.T) {
	sc := sim.Scenario{Name: "x", Seed: 3, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Policies: []sim.Policy{sim.ConcurrencyPolicy{Name: "static", Limit: 5}}}
	res := sim.Result{Scenario: "x", Seed: 3, Policies: []sim.PolicyResult{{
		Name: "static",
		Summary: sim.Summary{
			Sent: 40, Successes: 16, Failed: 5, Goodput: 2, Throughput: 3, Capacity: 4, Demand: 2.5, Achievable: 2.5,
			MeanLatency: 1600 * time.Millisecond, MeanWait: 250 * time.Millisecond,
			Rejects: map[string]int64{"limit": 5, "shed": 0},
			Latency: sim.Percentiles{Count: 16, P50: 1500 * time.Millisecond, P99: 2 * time.Second},
		},
		Series: []sim.Point{{T: time.Second, Goodput: 2, P99: 250 * time.Millisecond, Limit: 5, InFlight: 4,
			RejectsBy: map[string]float64{"limit": 5}}},
	}}}
	r := FromSim(sc, res, time.Second)
	if r.IntervalS != 1 || r.DurationS != 10 || r.Scenario != "x" || r.Seed != 3 {
		t.Errorf("header: %+v", r)
	}
	if r.Policies[0].Kind != "concurrency" {
		t.Errorf("kind = %q", r.Policies[0].Kind)
	}
	s := r.Policies[0].Summary
	if s.OfferedRPS != 5 { // 40 sent over the 8 s after warm-up
		t.Errorf("offered = %v, want 5", s.OfferedRPS)
	}
	if s.GoodputPct != 50 {
		t.Errorf("goodput pct = %v, want 50", s.GoodputPct)
	}
	// 2 rps of the 2.5 the clients wanted, below the capacity of 4: the
	// demand was the bound.
	if s.DemandRPS != 2.5 || s.AchievableRPS != 2.5 || s.GoodputPctOfAchievable != 80 {
		t.Errorf("demand %v, achievable %v, pct %v; want 2.5, 2.5, 80", s.DemandRPS, s.AchievableRPS, s.GoodputPctOfAchievable)
	}
	if s.MeanLatencyMs != 1600 || s.MeanWaitMs != 250 {
		t.Errorf("means %v ms, %v ms; want 1600 and 250", s.MeanLatencyMs, s.MeanWaitMs)
	}
	if s.Failed != 5 {
		t.Errorf("failed = %d, want 5", s.Failed)
	}
	if s.RejectedTotal != 5 || len(s.Rejected) != 1 {
		t.Errorf("rejected = %v (%d), want only limit 5", s.Rejected, s.RejectedTotal)
	}
	if s.Success.P50 != 1500 || s.Success.P99 != 2000 || s.Success.Count != 16 {
		t.Errorf("success latency = %+v", s.Success)
	}
	if s.Within == nil || s.Within.BoundMs != 1000 {
		t.Errorf("within = %+v", s.Within)
	}
	pt := r.Policies[0].Series[0]
	if pt.TS != 1 || pt.P99Ms != 250 || pt.Limit != 5 || pt.InFlight != 4 || pt.RejectedByRPS["limit"] != 5 {
		t.Errorf("point = %+v", pt)
	}
	if r2 := FromSim(sc, res, 0); r2.Policies[0].Summary.Within != nil {
		t.Error("within set without a bound")
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		labels []string
	}{
		{15, 180, []string{"20", "50", "100"}},
		{0.5, 3, []string{"0.5", "1", "2"}},
		{900, 5000, []string{"1000", "2000", "5000"}},
		{0, 10, nil}, // no log axis through zero
	} {
		var labels []string
		for _, tk := range (logTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Value < tc.lo || tk.Value > tc.hi {
				t.Errorf("Ticks(%v, %v): tick %v out of range", tc.lo, tc.hi, tk.Value)
			}
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if !reflect.DeepEqual(labels, tc.labels) {
			t.Errorf("Ticks(%v, %v) labels %q, want %q", tc.lo, tc.hi, labels, tc.labels)
		}
	}
}

// TestFromSimKnowsEverySummaryField fails when the simulator's Summary
// gains a field this package has not decided about, so a new figure does
// not silently miss the report.
func TestFromSimKnowsEverySummaryField(t *testing.T) {
	known := map[string]bool{
		"Sent": true, "Unsent": true, "Successes": true, "SucceededBySend": true, "Failed": true, "Goodput": true,
		"Throughput": true, "Capacity": true, "Rejects": true, "Refused": true,
		"OriginTimeouts": true, "Timeouts": true, "Retries": true, "Wasted": true,
		"Latency": true, "RejectLatency": true, "Wait": true,
		"Demand": true, "Achievable": true, "MeanLatency": true, "MeanWait": true,
	}
	for f := range reflect.TypeFor[sim.Summary]().Fields() {
		if !known[f.Name] {
			t.Errorf("sim.Summary.%s is not in the report: map it in FromSim (and docs/scenarios.md)", f.Name)
		}
	}
	for f := range reflect.TypeFor[sim.Point]().Fields() {
		if !map[string]bool{"T": true, "Offered": true, "Goodput": true, "Throughput": true, "Rejects": true, "RejectsBy": true, "RejectedSent": true,
			"Timeouts": true, "Capacity": true, "Demand": true, "Achievable": true, "P50": true, "P99": true, "AdmittedP50": true, "Limit": true, "InFlight": true,
			"Queued": true, "OriginBusy": true, "OriginQ": true}[f.Name] {
			t.Errorf("sim.Point.%s is not in the report: map it in FromSim (and docs/scenarios.md)", f.Name)
		}
	}
}

// TestTableNamesPrintable: names come from a file; a terminal escape or a
// bidirectional-text control in one must not reach the terminal.
func TestTableNamesPrintable(t *testing.T) {
	r := sample()
	r.Scenario = "demo\x1b]0;pwned\x07"
	r.Policies[0].Name = "none\u202Eevil"
	r.Policies[1].Name = "tab\there"
	r.Policies[0].Phases = []Phase{{ToS: 2}, {FromS: 2, ToS: 4}}
	r.Policies[1].Phases = r.Policies[0].Phases
	var buf bytes.Buffer
	if err := Table(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, c := range out {
		if c != '\n' && !unicode.IsPrint(c) {
			t.Fatalf("table holds %U:\n%q", c, out)
		}
	}
	for _, want := range []string{`"demo\x1b]0;pwned\a"`, `"none\u202eevil"`, `"tab\there"`} {
		if strings.Count(out, want) < 1 {
			t.Errorf("table lacks the escaped name %s:\n%s", want, out)
		}
	}
	if strings.Count(out, `"none\u202eevil"`) != 2 {
		t.Errorf("the phase table does not escape the name:\n%s", out)
	}
}

// TestJSONNamesPrintable: the JSON escapes what the table escapes, and
// still decodes to the names as they were.
func TestJSONNamesPrintable(t *testing.T) {
	r := sample()
	r.Scenario = "demo\u202eevil\u2066"
	r.Policies[0].Name = "none\x1b[2J\U000E0041"
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range buf.String() {
		if c != '\n' && !unicode.IsPrint(c) {
			t.Fatalf("JSON holds %U", c)
		}
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Scenario != r.Scenario || back.Policies[0].Name != r.Policies[0].Name {
		t.Errorf("names changed: %q, %q", back.Scenario, back.Policies[0].Name)
	}
}

// TestPlotSVGNames: names come from a file. In the SVG they are escaped
// markup, and a control character in one, which XML does not allow even
// escaped, must not make the whole plot unreadable.
func TestPlotSVGNames(t *testing.T) {
	r := sample()
	r.Scenario = "demo\x1b</text><script>alert(1)</script>"
	r.Policies[0].Name = "none\x07<b>"
	var buf bytes.Buffer
	if err := Plot(&buf, "svg", r); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok && (el.Name.Local == "script" || el.Name.Local == "b") {
			t.Fatalf("a name made a <%s> element", el.Name.Local)
		}
	}
}

// TestPlotOneLatency: when every success took the same time and it is a
// tick value (1, 2, 5 × 10^n ms, as a constant 1 ms service gives), the
// latency axis rounded to an empty range, which gonum widened by ±1 to
// <= 0 and then panicked on ("Values must be greater than 0 for a log
// scale").
func TestPlotOneLatency(t *testing.T) {
	for _, ms := range []float64{0.001, 0.5, 1, 2, 5, 1000} {
		r := sample()
		for i := range r.Policies {
			for j := range r.Policies[i].Series {
				r.Policies[i].Series[j].P50Ms, r.Policies[i].Series[j].P99Ms = ms, ms
			}
		}
		p := latencyPanel(r)
		if !(p.Y.Min > 0 && p.Y.Min < ms && ms < p.Y.Max) {
			t.Errorf("%g ms: latency axis [%g, %g], want 0 < min < %g < max", ms, p.Y.Min, p.Y.Max, ms)
		}
		for _, format := range []string{"svg", "png"} {
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Errorf("%g ms, %s: panic: %v", ms, format, v)
					}
				}()
				if err := Plot(&bytes.Buffer{}, format, r); err != nil {
					t.Errorf("%g ms, %s: %v", ms, format, err)
				}
			}()
		}
	}
}
