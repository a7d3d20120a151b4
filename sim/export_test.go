package sim

// Exported for the external tests (package sim_test).
var (
	Seed003Adaptive = seed003Adaptive
	Seed003         = seed003
)
