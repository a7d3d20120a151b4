package sim

import "errors"

// Run validates s and simulates each of its policies in turn.
func Run(s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	return Result{}, errors.New("sim: engine not yet committed")
}
