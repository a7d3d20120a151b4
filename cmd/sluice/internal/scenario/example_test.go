package scenario_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
)

func ExampleParse() {
	src := `
duration: 1m
origin:
  workers: 7
  service: {kind: constant, mean: 2s}
load: {rate: 5, timeout: 2.5s}
policies:
  - {name: static-5, kind: concurrency, limit: 5}
`
	f, err := scenario.Parse("scenarios/slow.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Name, f.Duration, f.Origin.Workers, f.Load.Timeout, f.Policies[0].Label())
	// Output:
	// slow 1m0s 7 2.5s static-5
}

func ExampleParse_error() {
	src := `
duration: 1m
origin:
  workers: 7
  service: {kind: constant, mean: 2}
  qeue: 10
`
	_, err := scenario.Parse("scenarios/slow.yaml", []byte(src))
	fmt.Println(err)
	fmt.Println(errors.Is(err, scenario.ErrInvalid))
	// Output:
	// scenarios/slow.yaml:5: origin.service.mean: "2" has no unit: write a duration like "2s"
	// scenarios/slow.yaml:6: origin.qeue: unknown key (known here: changes, queue, service, timeout, workers)
	// true
}

// slowOrigin is seed 003's slow origin: 7 workers at 2 s a request serve
// 3.5 rps (Little's law) while the clients send 5.
const slowOrigin = `
duration: 2m
warmup: 30s
origin: {workers: 7, queue: 100, service: {kind: constant, mean: 2s}}
load: {rate: 5, client_workers: 10, timeout: 2.5s}
policies:
  - {name: none, kind: none}
  - {name: static-5, kind: concurrency, limit: 5}
`

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "scenario")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(path, []byte(slowOrigin), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	f, err := scenario.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Name, f.Duration, len(f.Policies), "policies")
	// Output:
	// slow 2m0s 2 policies
}

// Run runs the scenario in the simulator, in virtual time: two minutes of
// a slow origin take milliseconds.
func ExampleFile_Run() {
	f, err := scenario.Parse("slow.yaml", []byte(slowOrigin))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := f.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range res.Policies {
		fmt.Printf("%s: goodput %.1f rps of a capacity of %.1f\n", p.Name, p.Summary.Goodput, p.Summary.Capacity)
	}
	// Output:
	// none: goodput 0.0 rps of a capacity of 3.5
	// static-5: goodput 2.3 rps of a capacity of 3.5
}

// Validate checks a scenario again after a change, such as a -duration
// flag, and places the problem in the file.
func ExampleFile_Validate() {
	f, err := scenario.Parse("slow.yaml", []byte(slowOrigin))
	if err != nil {
		fmt.Println(err)
		return
	}
	f.Duration = 10 * time.Second // shorter than the file's warm-up
	fmt.Println(f.Validate())
	f.Duration = 1000 * time.Hour // too long to simulate
	fmt.Println(f.Validate())
	// Output:
	// slow.yaml:3: warmup: must be in [0, duration - interval] (9s): the summary needs at least one interval, got 30s
	// slow.yaml:2: duration: duration 1000h0m0s / interval 1s is 3600000 points per policy, more than the 100000 a run may keep
}
