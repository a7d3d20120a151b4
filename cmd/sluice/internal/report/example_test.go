package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/sim"
)

func tiny() *report.Report {
	return &report.Report{
		Version: report.Version, Scenario: "tiny", Seed: 1, DurationS: 10, IntervalS: 1,
		Policies: []report.Policy{{
			Name: "static-5",
			Summary: report.Summary{
				OfferedRPS: 5, GoodputRPS: 2.4, ThroughputRPS: 2.5, CapacityRPS: 3.5, GoodputPct: 68.6,
				DemandRPS: 5, AchievableRPS: 3.5, GoodputPctOfAchievable: 68.6,
				Sent: 50, Successes: 24, Rejected: map[string]int64{"limit": 25}, RejectedTotal: 25,
				Success:   report.Latency{Count: 24, P50: 2000, P90: 2000, P99: 2004, P999: 2004, Max: 2004},
				Rejection: report.Latency{Count: 25},
			},
			Series: []report.Point{},
		}},
	}
}

func ExampleTable() {
	if err := report.Table(os.Stdout, tiny()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// scenario tiny: 10s simulated, seed 1, capacity 3.50 rps, demand 5.00 rps: achievable 3.50 rps
	//
	// POLICY    OFFERED/s  GOODPUT/s  %ACHIEVABLE  THROUGHPUT/s  OK p50  OK p99  OK p99.9  TIMEOUTS  ORIGIN ERR  REJECTED       REJ p99
	// static-5  5.00       2.40       69%          2.50          2.00s   2.00s   2.00s     0         0           25 (limit 25)  0µs
}

func ExampleJSON() {
	var buf bytes.Buffer
	if err := report.JSON(&buf, tiny()); err != nil {
		fmt.Println(err)
	}
	// A script reads the documented field names.
	var doc struct {
		Scenario string `json:"scenario"`
		Policies []struct {
			Name    string `json:"name"`
			Summary struct {
				Goodput  float64          `json:"goodput_rps"`
				Rejected map[string]int64 `json:"rejected"`
				Success  struct {
					P99 float64 `json:"p99"`
				} `json:"success_latency_ms"`
			} `json:"summary"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		fmt.Println(err)
	}
	for _, p := range doc.Policies {
		fmt.Printf("%s %s: goodput %v rps, p99 %v ms, rejected %v\n",
			doc.Scenario, p.Name, p.Summary.Goodput, p.Summary.Success.P99, p.Summary.Rejected)
	}
	// Output:
	// tiny static-5: goodput 2.4 rps, p99 2004 ms, rejected map[limit:25]
}

func ExamplePlotFormat() {
	for _, name := range []string{"run.svg", "run.PNG", "run.pdf"} {
		format, err := report.PlotFormat(name)
		fmt.Printf("%s: %q %v\n", name, format, err)
	}
	// Output:
	// run.svg: "svg" <nil>
	// run.PNG: "png" <nil>
	// run.pdf: "" plot file must end in .svg or .png: "run.pdf"
}

// FromSim turns a simulator run into a report; Table, JSON and Plot draw
// it.
func ExampleFromSim() {
	s := sim.Scenario{
		Name:     "slow",
		Duration: time.Minute,
		Origin:   sim.Origin{Workers: 7, Queue: 100, Service: sim.Dist{Kind: sim.Constant, Mean: 2 * time.Second}},
		Load:     sim.Load{Rate: 5, Timeout: 2500 * time.Millisecond},
		Policies: []sim.Policy{sim.ConcurrencyPolicy{Name: "static-5", Limit: 5}},
	}
	res, err := sim.Run(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := report.FromSim(s, res, 0)
	p := r.Policies[0]
	fmt.Printf("%s %s: %d points, capacity %.1f rps\n", r.Scenario, p.Name, len(p.Series), p.Summary.CapacityRPS)
	// Output:
	// slow static-5: 60 points, capacity 3.5 rps
}

func ExamplePlot() {
	var buf bytes.Buffer
	if err := report.Plot(&buf, "svg", tiny()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(strings.Contains(buf.String(), "<svg"), strings.Contains(buf.String(), "static-5"))
	fmt.Println(report.Plot(&buf, "pdf", tiny()))
	// Output:
	// true true
	// plot file must end in .svg or .png: format "pdf"
}

// PlotFile picks the format from the name, and refuses a name it cannot
// draw before it creates anything.
func ExamplePlotFile() {
	dir, err := os.MkdirTemp("", "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"run.png", "run.pdf"} {
		path := filepath.Join(dir, name)
		err := report.PlotFile(path, tiny())
		_, statErr := os.Stat(path)
		fmt.Printf("%s: error %v, file written %v\n", name, err != nil, statErr == nil)
	}
	// Output:
	// run.png: error false, file written true
	// run.pdf: error true, file written false
}
