// Package counter holds the admitted and rejected-by-reason counters every
// limiter keeps for sluice.Stats. Counters are atomic so that counting
// never takes a lock on the admit and reject paths. A limiter's Stats may
// still take its own lock to read the rest of its state consistently (a
// rate.Bucket's does, to find its admissions counted in one place while a
// setter swaps its state).
package counter

import (
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// Counters counts admissions and rejections. The zero value is ready to use.
type Counters struct {
	admitted atomic.Uint64
	rejected [sluice.NumReasons]atomic.Uint64
}

// Admit counts one admission.
func (c *Counters) Admit() { c.admitted.Add(1) }

// Reject counts one rejection for r.
func (c *Counters) Reject(r sluice.Reason) {
	if int(r) < len(c.rejected) {
		c.rejected[r].Add(1)
	}
}

// Fill copies the counters into s.
func (c *Counters) Fill(s *sluice.Stats) {
	s.Admitted = c.admitted.Load()
	for i := range c.rejected {
		s.Rejected[i] = c.rejected[i].Load()
	}
}
