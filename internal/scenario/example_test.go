package scenario_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/scenario"
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
	fmt.Println(f.Name, f.Duration, f.Origin.Workers, f.Load.Timeout, f.Policies[0].Name)
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
