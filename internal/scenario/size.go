package scenario

import (
	"fmt"
	"time"
)

// The simulator keeps a time-series point per interval and, under
// overload, a record per request in flight, for every policy. These bounds
// keep a typo (a duration in hours, a rate with three zeros too many, a
// 1ns interval) from running for days or exhausting memory: the file is
// refused before anything runs.
const (
	// maxPoints bounds duration / interval: a day at the default 1 s.
	maxPoints = 100_000
	// maxRequests bounds the requests (retries included) one policy's
	// run may send: seconds of CPU and well under a GB at the worst.
	maxRequests = 10_000_000
	// Every policy runs the whole scenario and keeps its series, so the
	// run as a whole is bounded too: ten policies at the bounds above,
	// or more policies on a smaller run.
	maxTotalPoints   = 10 * maxPoints
	maxTotalRequests = 5 * maxRequests
)

// checkSize refuses a scenario whose run would exceed the bounds above.
// The request count is an upper bound from the peak rate, so a ramp is
// judged by its top.
func (f *File) checkSize() error {
	s := &f.Scenario
	interval := s.Interval
	if interval == 0 {
		interval = time.Second // the simulator's default
	}
	if n := s.Duration / interval; n > maxPoints {
		field := "duration"
		if s.Interval != 0 {
			field = "interval"
		}
		return f.errorAt(field, fmt.Sprintf("duration %v / interval %v is %d points per policy, more than the %d a run may keep", s.Duration, interval, n, maxPoints))
	}
	points := int64(s.Duration/interval) * int64(len(s.Policies))
	l := &s.Load
	peak := l.Rate
	for _, st := range l.Steps {
		peak = max(peak, st.Rate)
	}
	// Bursts that would fall after the end are never sent.
	var bursts float64
	if b := l.Bursts; b.At < s.Duration {
		bursts = float64(b.Count)
		if b.Every > 0 {
			bursts = min(bursts, float64((s.Duration-b.At-1)/b.Every+1))
		}
	}
	sent := peak*s.Duration.Seconds() + float64(l.Bursts.Size)*bursts
	retries := float64(l.Retries.Max)
	if l.Retries.Budget > 0 {
		retries = min(retries, l.Retries.Budget)
	}
	requests := sent * (1 + retries)
	if requests > maxRequests {
		return f.errorAt("duration", fmt.Sprintf("%v at up to %g requests per second (with bursts and retries) is up to %.3g requests per policy, more than the %d a run may simulate: shorten the duration or lower the load", s.Duration, peak, requests, maxRequests))
	}
	if total := requests * float64(len(s.Policies)); points > maxTotalPoints || total > maxTotalRequests {
		return f.errorAt("policies", fmt.Sprintf("%d policies of %d points and up to %.3g requests each are more than the %d points and %d requests a whole run may have: compare fewer policies or shorten the run", len(s.Policies), points/int64(len(s.Policies)), requests, maxTotalPoints, maxTotalRequests))
	}
	return nil
}
