package sim

import "github.com/sluicehq/sluice/concurrency"

// ConcurrencyConfig returns the concurrency.Config that a concurrency or
// adaptive policy runs with, its algorithm (the default one when the policy
// names none) freshly built. The lab builds a real concurrency.Limiter from
// it, so that the policy on sockets is the one the simulator ran.
func (p Policy) ConcurrencyConfig() (concurrency.Config, error) {
	return p.coreConfig()
}
