package sim

import "github.com/sluicehq/sluice/concurrency"

// ConcurrencyConfig returns the concurrency.Config the policy runs with.
// The lab builds a real concurrency.Limiter from it, so that the policy on
// sockets is the one the simulator ran.
func (p ConcurrencyPolicy) ConcurrencyConfig() (concurrency.Config, error) {
	return p.coreConfig(p.Limit), nil
}

// ConcurrencyConfig returns the concurrency.Config the policy runs with,
// its algorithm (the default one when the policy names none) freshly
// built, as ConcurrencyPolicy's does.
func (p AdaptivePolicy) ConcurrencyConfig() (concurrency.Config, error) {
	alg, err := newAlgorithm(&p)
	if err != nil {
		return concurrency.Config{}, err
	}
	cfg := p.coreConfig(p.Limit)
	cfg.Algorithm = alg
	return cfg, nil
}
