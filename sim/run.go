package sim

import "fmt"

// Run validates s and simulates each of its policies in turn, each against
// a fresh origin and the same arrivals. It is deterministic: the same
// scenario gives the same Result.
func Run(s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{Scenario: s.Name, Seed: s.Seed, Policies: make([]PolicyResult, len(s.Policies))}
	for i := range s.Policies {
		pr, err := runPolicy(&s, i)
		if err != nil {
			return Result{}, err
		}
		res.Policies[i] = pr
	}
	return res, nil
}

// RunPolicy simulates the policy s.Policies[i] alone; Run calls it for
// each. It lets a caller run policies in parallel.
func RunPolicy(s Scenario, i int) (PolicyResult, error) {
	if err := s.Validate(); err != nil {
		return PolicyResult{}, err
	}
	if i < 0 || i >= len(s.Policies) {
		return PolicyResult{}, bad("policies", "no policy %d (there are %d)", i, len(s.Policies))
	}
	return runPolicy(&s, i)
}

func runPolicy(s *Scenario, i int) (PolicyResult, error) {
	p := s.Policies[i]
	e, err := newEngine(s, i)
	if err != nil {
		// The scenario validated, so this is a limit the decision code
		// refuses that Validate does not know about: still a field error.
		return PolicyResult{}, &FieldError{Field: fmt.Sprintf("policies[%d]", i), Problem: err.Error()}
	}
	e.run()
	if e.full {
		return PolicyResult{}, e.overflow(i)
	}
	sum := e.m.summary()
	e.drain()
	sum.SucceededBySend = e.bySend
	return PolicyResult{
		Name:      p.Label(),
		Summary:   sum,
		Series:    e.m.points,
		Simulated: e.simulated,
		latency:   e.m.lat,
		wait:      e.m.wait,
	}, nil
}
