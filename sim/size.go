package sim

import (
	"cmp"
	"time"
)

// A run keeps a time-series point per interval and, under overload, a
// record per request waiting anywhere, for every policy, and does work in
// proportion to the requests it sends. These bounds keep a scenario with a
// typo (a duration in hours, a rate with three zeros too many, a 1 ns
// interval) from running for hours or exhausting memory: Validate refuses
// it before anything runs. maxDuration keeps sums of times within int64.
const (
	maxPoints        = 100_000    // per policy: a day at the default 1 s
	maxRequests      = 10_000_000 // per policy, retries included
	maxTotalPoints   = 10 * maxPoints
	maxTotalRequests = 5 * maxRequests
	maxDuration      = 100 * 365 * 24 * time.Hour
)

// checkDuration refuses a negative duration or one past maxDuration.
func checkDuration(f string, d time.Duration) error {
	if d < 0 || d > maxDuration {
		return bad(f, "must be in [0, %v], got %v", maxDuration, d)
	}
	return nil
}

// size returns an upper bound on the points and requests one policy's run
// keeps and sends: the peak rate over the whole duration, every burst that
// falls before the end, and as many retries as the policy allows.
func (s *Scenario) size() (interval time.Duration, peak float64, points int64, requests float64) {
	interval = cmp.Or(s.Interval, time.Second)
	l := &s.Load
	peak = l.Rate
	for _, st := range l.Steps {
		peak = max(peak, st.Rate)
	}
	var bursts float64
	if b := l.Bursts; b.Size > 0 && b.At < s.Duration {
		bursts = float64(b.Count)
		if b.Every > 0 {
			bursts = min(bursts, float64((s.Duration-b.At-1)/b.Every+1))
		}
	}
	retries := float64(l.Retries.Max)
	if l.Retries.Budget > 0 {
		retries = min(retries, l.Retries.Budget)
	}
	sent := peak*s.Duration.Seconds() + float64(l.Bursts.Size)*bursts
	return interval, peak, int64(s.Duration / interval), sent * (1 + retries)
}

// checkSize refuses a scenario whose run would pass the bounds above.
func (s *Scenario) checkSize() error {
	interval, peak, points, requests := s.size()
	if points > maxPoints {
		field := "duration"
		if s.Interval != 0 {
			field = "interval"
		}
		return bad(field, "duration %v / interval %v is %d points per policy, more than the %d a run may keep", s.Duration, interval, points, maxPoints)
	}
	if requests > maxRequests {
		return bad("duration", "%v at up to %g requests per second (with bursts and retries) is up to %.3g requests per policy, more than the %d a run may simulate: shorten the duration or lower the load",
			s.Duration, peak, requests, maxRequests)
	}
	n := int64(len(s.Policies))
	if points*n > maxTotalPoints || requests*float64(n) > maxTotalRequests {
		return bad("policies", "%d policies of %d points and up to %.3g requests each are more than the %d points and %d requests a whole run may have: compare fewer policies or shorten the run",
			n, points, requests, maxTotalPoints, maxTotalRequests)
	}
	return nil
}
