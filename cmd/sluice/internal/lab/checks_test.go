package lab

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// seed003Recommended is a simulated run of seed 003 at time scale 1 with
// only the recommended policy, its slow phase (90-180 s) at the given
// in flight and success p50; every other interval, when rejects is set,
// answered only rejections (a throughput but no success, so no p50).
func seed003Recommended(inFlight int, p50 float64, rejects bool) *ExperimentResult {
	var series []report.Point
	for ts := 91.0; ts <= 180; ts++ {
		pt := report.Point{TS: ts, OfferedRPS: 5, CapacityRPS: 3.5, GoodputRPS: 3.5, ThroughputRPS: 3.5, InFlight: inFlight, P50Ms: p50}
		if rejects && int(ts)%2 == 0 {
			pt.GoodputRPS, pt.P50Ms = 0, 0
		}
		series = append(series, pt)
	}
	return &ExperimentResult{TimeScale: 1, Sim: &report.Report{Policies: []report.Policy{{Name: "recommended", Series: series}}}}
}

// held returns whether each check whose name starts with prefix held.
func held(t *testing.T, checks []Check, prefix string) bool {
	t.Helper()
	for _, c := range checks {
		if strings.HasPrefix(c.Name, prefix) {
			return c.Held
		}
	}
	t.Fatalf("no check named %q... in %v", prefix, checks)
	return false
}

func TestChecks003Recommended(t *testing.T) {
	const inFlight, p50 = "recommended in flight", "recommended success p50"
	if cs := checks003(seed003Recommended(7, 2050, false)); !held(t, cs, inFlight) || !held(t, cs, p50) {
		t.Errorf("7 in flight, p50 2050 ms: %v, want both held", cs)
	}
	if cs := checks003(seed003Recommended(9, 2050, false)); held(t, cs, inFlight) {
		t.Errorf("9 in flight for 7 workers: held, want not (> 1.25x)")
	}
	if cs := checks003(seed003Recommended(7, 2700, false)); held(t, cs, p50) {
		t.Errorf("p50 2700 ms for 2 s of work: held, want not (> 1.3x)")
	}
	// Intervals with no success have no p50: they do not pull the mean
	// of a slow p50 under the bar.
	if cs := checks003(seed003Recommended(7, 2700, true)); held(t, cs, p50) {
		t.Errorf("p50 2700 ms in every interval with a success: held, want not")
	}
	if cs := checks003(seed003Recommended(0, 0, false)); held(t, cs, inFlight) || held(t, cs, p50) {
		t.Errorf("nothing in flight and no success: held, want neither")
	}
}
