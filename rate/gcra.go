package rate

import (
	"time"

	"github.com/sluicehq/sluice/internal/gcra"
)

// The token-bucket arithmetic lives in internal/gcra, shared with
// keyed.Buckets (one word per key); this file binds it to a Config.

// params is a bucket configuration compiled for arithmetic. Immutable.
type params struct {
	gcra.Params // 40 bytes: the hot fields fill the first cache line
	maxWait     time.Duration
	rate        float64
	// burst is Config.Burst. The word's own burst (Params.Burst) is lower
	// once the state leases (lease.go).
	burst int64
}

// compile derives params from a validated Config.
func compile(c Config) params {
	return params{Params: gcra.Compile(c.Rate, int64(c.Burst)), maxWait: c.MaxWait, rate: c.Rate, burst: int64(c.Burst)}
}

// retired marks a state that a setter has replaced: no CAS on it can succeed
// any more, so callers reload the bucket's current state. No arithmetic
// result is ever retired.
const retired = gcra.Retired
