package lab

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/sim"
)

// Experiment is one scenario file as the lab runs it: which of its policies,
// at what time scale, and what the seed it comes from claimed.
type Experiment struct {
	// Name is short: "seed003".
	Name string
	// Title says what the experiment asks, for the report's heading.
	Title string
	// File is the scenario file, relative to the repository root for the
	// tour (Tour resolves it), or as given on the command line.
	File string
	// Claim is the seed's own figure, quoted in the report beside ours.
	Claim string
	// Policies are the names of the file's policies to run, in this order;
	// nil runs them all.
	Policies []string
	// Add are policies run beside the file's: the tour adds sluice's
	// recommended adaptive policy where the file names its algorithms.
	Add []sim.Policy
	// TimeScale multiplies every duration and divides every rate (Scale);
	// 0 means 1.
	TimeScale float64
	// Duration, when > 0, replaces the file's duration (in the file's
	// time, before scaling): the tour stops seed 002 once its tasks are
	// done.
	Duration time.Duration
	// LoadScale, when in (0, 1), shortens the load's schedule alone (the
	// run's duration, warm-up and interval, the steps' and bursts' times)
	// and leaves the origin, the policies and the client timeout as they
	// are: a ramp then climbs faster through the same rates. Seed 000's
	// figures are per offered rate, so a faster ramp keeps them while a
	// time scale would multiply the rates. 0 means 1.
	LoadScale float64
	// OneAtATime runs the policies on sockets one after the other rather
	// than all at once: at hundreds of requests per second each, five
	// policies at once measure the machine more than the policies.
	OneAtATime bool
	// Curves draws seed 000's figures against offered load as well as the
	// figures over time.
	Curves bool
	// checks are the seed's claims as tests of the results.
	checks func(x *ExperimentResult) []Check
}

// recommended is sluice's recommended adaptive policy: the algorithm the
// simulator and the library use when none is named (so the tour follows
// the recommendation when it changes), behind the short LIFO queue that
// package adaptive recommends with it, whose wait is bounded to four mean
// service times once the queue stands (until then a waiter may stay until
// four times that after the queue was last empty):
// without the bound LIFO's oldest waiters wait until their client gives up
// (seconds, on seed 000) to be rejected then.
var recommended = sim.AdaptivePolicy{Name: "adaptive", QueueConfig: sim.QueueConfig{Queue: 50, Discipline: concurrency.LIFO, MaxWaitServices: 4}}

// recommendedAs is recommended under another name, for a file that has a
// policy named "adaptive" of its own.
func recommendedAs(name string) sim.Policy {
	p := recommended
	p.Name = name
	return p
}

// Tour returns the seeds' experiments that `sluice lab` runs without
// arguments, with files relative to the repository root. Time scales keep
// the whole tour under three minutes of real time.
func Tour() []Experiment {
	return []Experiment{
		{
			Name:  "seed000",
			Title: "An SLA with a rate limit: the ramp to 600 rps",
			File:  "scenarios/seed000-ramp.yaml",
			Claim: "no limit: success falls past ~450 rps; ticker: 100% to 600 rps but p50/p95 1250/2250 ms; ticker + 75 ms: 72% at 600 rps, failures take 75 ms; rate.Limiter + 75 ms: the same, failures sub-millisecond. SLA: 99.99% to 425 rps, p95 <= 275 ms",
			// One at a time, the lightest first: no limit and the
			// unbounded ticker hold thousands of requests at 600 rps,
			// and what they leave behind (connections, garbage) must
			// not weigh on the runs that follow.
			Policies: []string{"token-bucket+75ms", "ticker+75ms", "ticker", "none"},
			Add:      []sim.Policy{recommended},
			// The ramp's rates are the experiment: scaling time would
			// multiply them and load the machine, not the origin.
			TimeScale:  1,
			LoadScale:  0.2,
			OneAtATime: true,
			Curves:     true,
			checks:     checks000,
		},
		{
			Name:      "seed001",
			Title:     "Bursts at a concurrency limit: FIFO, LIFO, CoDel",
			File:      "scenarios/seed001-bursts.yaml",
			Claim:     "200 requests every 500 ms, 5 rounds: served within 1 s FIFO 339 vs LIFO 450",
			Policies:  []string{"fifo", "lifo", "codel-1s"},
			TimeScale: 1,
			checks:    checks001,
		},
		{
			Name:  "seed002",
			Title: "A client herd against a throttling service",
			File:  "scenarios/seed002-herd.yaml",
			Claim: "firing every request at once: ~15 min; capping the requests in flight: ~2 min",
			// At half the time, a task's 100 ms of work dwarfs the few
			// milliseconds a real handoff between tasks costs; the
			// bounded executor is done by 20 s (10 s scaled).
			TimeScale: 0.5,
			Duration:  40 * time.Second,
			checks:    checks002,
		},
		{
			Name:     "seed003",
			Title:    "The origin slows down: no limit, a static limit, an adaptive one",
			File:     "scenarios/seed003-slowdown.yaml",
			Claim:    "after the slowdown to 3.5 rps: no limit ~0 rps of 200s, static 5 in flight 2.3 rps, the author's AIMD proxy 2.4-2.7 rps",
			Policies: []string{"none", "static-5", "adaptive"},
			// The file's "adaptive" is the seed's AIMD, which needs its
			// interval and backoff set for this origin; sluice's
			// recommended limit learns the 7 workers with its defaults.
			Add: []sim.Policy{recommendedAs("recommended")},
			// A fifth: the client's slack (2.5 s less 2 s of work) is then
			// 100 ms, more than a loaded machine's lag; the run stops 20 s
			// (file time) after the rollback.
			TimeScale: 0.2,
			Duration:  200 * time.Second,
			checks:    checks003,
		},
		{
			Name:      "seed004",
			Title:     "A token bucket at 300 and 600 req/s under 1000 req/s",
			File:      "scenarios/seed004-bucket.yaml",
			Claim:     "bucket at 300 req/s: 301 req/s measured with hey; at 600 req/s: 598 req/s",
			TimeScale: 1,
			checks:    checks004,
		},
	}
}

// FromFile is the experiment of a scenario file given on the command line:
// all its policies at time scale 1; when the file is one of the tour's, the
// tour's checks of the seed's claims apply to the policies it has.
func FromFile(path string) Experiment {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	e := Experiment{Name: base, Title: base, File: path, TimeScale: 1}
	for _, t := range Tour() {
		if filepath.Base(t.File) == filepath.Base(path) {
			e.Name, e.Title, e.Claim, e.Curves, e.checks = t.Name, t.Title, t.Claim, t.Curves, t.checks
		}
	}
	return e
}
