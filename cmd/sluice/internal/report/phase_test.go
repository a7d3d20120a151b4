package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
	"gonum.org/v1/plot/plotter"
)

// A scenario whose origin slows down halfway reports each phase with its
// own capacity (Little's law: workers / service time) and goodput, and the
// table prints them; without changes there are no phases.
func TestPhasesSplitAtOriginChanges(t *testing.T) {
	sc := sim.Scenario{
		Name: "phases", Seed: 1, Duration: 20 * time.Second,
		Origin: sim.Origin{Workers: 2, Queue: 10, Service: sim.Dist{Kind: sim.Constant, Mean: 100 * time.Millisecond},
			Changes: []sim.Change{{At: 10 * time.Second, Service: sim.Dist{Kind: sim.Constant, Mean: 400 * time.Millisecond}}}},
		Load:     sim.Load{Rate: 8, Timeout: time.Second},
		Policies: []sim.Policy{sim.NonePolicy{Name: "none"}},
	}
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	r := FromSim(sc, res, 0)
	ph := r.Policies[0].Phases
	if len(ph) != 2 || ph[0].FromS != 0 || ph[0].ToS != 10 || ph[1].FromS != 10 || ph[1].ToS != 20 {
		t.Fatalf("phases %+v, want 0-10 s and 10-20 s", ph)
	}
	// Capacity 20 rps, then 5 rps, exactly: the point that ends at the
	// change (10 s) had the old capacity for all its interval. 8 rps
	// offered: all served, then at most 5.
	for i, want := range []struct{ capacity, maxGood float64 }{{20, 8}, {5, 5}} {
		if ph[i].CapacityRPS != want.capacity {
			t.Errorf("phase %d: capacity %v rps, want %v", i, ph[i].CapacityRPS, want.capacity)
		}
		if achievable := min(8, want.capacity); ph[i].DemandRPS != 8 || ph[i].AchievableRPS != achievable ||
			ph[i].GoodputPctOfAchievable != 100*ph[i].GoodputRPS/achievable {
			t.Errorf("phase %d: demand %v, achievable %v, %v%%; want 8, %v, goodput/achievable", i,
				ph[i].DemandRPS, ph[i].AchievableRPS, ph[i].GoodputPctOfAchievable, achievable)
		}
		if ph[i].GoodputRPS <= 0 || ph[i].GoodputRPS > want.maxGood*1.01 {
			t.Errorf("phase %d: goodput %.2f rps, want in (0, %.0f]", i, ph[i].GoodputRPS, want.maxGood)
		}
	}
	if ph[0].GoodputRPS < 7.5 {
		t.Errorf("phase 0: goodput %.2f rps, want ≈ 8 (below capacity every request is served)", ph[0].GoodputRPS)
	}

	var table bytes.Buffer
	if err := Table(&table, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "GOODPUT BY PHASE  0s-10s (cap ") {
		t.Errorf("table has no phase header:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Policies[0].Phases) != 2 {
		t.Fatalf("phases do not round-trip through JSON: %v", err)
	}

	sc.Origin.Changes = nil
	res, err = sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if ph := FromSim(sc, res, 0).Policies[0].Phases; ph != nil {
		t.Errorf("an origin that never changes has phases %+v", ph)
	}
}

func TestNiceLogBounds(t *testing.T) {
	for _, c := range []struct{ v, below, above float64 }{
		{1000.4, 1000, 2000}, {2400, 2000, 5000}, {7, 5, 10}, {0.03, 0.02, 0.05}, {1, 1, 1}, {5000, 5000, 5000},
	} {
		if b, a := niceBelow(c.v), niceAbove(c.v); math.Abs(b-c.below) > 1e-9*c.below || math.Abs(a-c.above) > 1e-9*c.above {
			t.Errorf("%v: below %v above %v, want %v and %v", c.v, b, a, c.below, c.above)
		}
	}
}

// A goodput series of whole-number counts that alternates around a level
// is drawn as that level once averaged; a run short enough is not averaged.
func TestGoodputSmoothing(t *testing.T) {
	r := &Report{DurationS: 240, IntervalS: 1}
	if k := smoothing(r); k != 4 {
		t.Fatalf("smoothing over 240 s of 1 s points = %d intervals, want 4", k)
	}
	seg := plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 5}, {X: 3, Y: 2}, {X: 4, Y: 4}, {X: 5, Y: 1}, {X: 6, Y: 5}}
	got := movingAverage([]plotter.XYs{seg}, 4)[0]
	for i, want := range []float64{1, 3, 8.0 / 3, 3, 3, 3} {
		if math.Abs(got[i].Y-want) > 1e-9 || got[i].X != seg[i].X {
			t.Errorf("point %d: %v, want (%v, %v)", i, got[i], seg[i].X, want)
		}
	}
	if k := smoothing(&Report{DurationS: 10, IntervalS: 1}); k != 1 {
		t.Errorf("a 10-point run is averaged over %d points, want 1 (raw)", k)
	}
}
