package sim

import (
	"cmp"
	"fmt"
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

	// maxLive bounds the requests alive at once in one policy's run
	// (waiting in the policy, at the origin, or held by a client between
	// retries). Each holds about 200 bytes: its record, its deadline event,
	// its entry in the policy's and the origin's queues, and the slack of
	// the slices that grow to hold them. A bound on requests sent is not
	// enough: 10 million requests queued behind a limit of 1 took 2 GB.
	maxLive = 1_000_000
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
	for i := range s.Policies {
		if err := s.checkWaiting(i, peak, requests); err != nil {
			return err
		}
	}
	n := int64(len(s.Policies))
	if points*n > maxTotalPoints || requests*float64(n) > maxTotalRequests {
		return bad("policies", "%d policies of %d points and up to %.3g requests each are more than the %d points and %d requests a whole run may have: compare fewer policies or shorten the run",
			n, points, requests, maxTotalPoints, maxTotalRequests)
	}
	return nil
}

// checkWaiting refuses a policy whose queue could hold more than maxLive
// requests at once (Policy.waiting bounds it).
func (s *Scenario) checkWaiting(i int, peak, requests float64) error {
	field, waiting := s.Policies[i].waiting(s, peak, requests)
	if field != "" && waiting > maxLive {
		return bad(fmt.Sprintf("policies[%d].%s", i, field), "up to %.3g requests could wait in this policy at once, more than the %d a run may hold in memory: bound the queue, or set max_wait or load.timeout",
			waiting, maxLive)
	}
	return nil
}

func (NonePolicy) waiting(*Scenario, float64, float64) (string, float64) { return "", 0 }

func (p ConcurrencyPolicy) waiting(s *Scenario, peak, requests float64) (string, float64) {
	return "queue", s.queueBound(p.Queue, p.MaxWait, peak, requests)
}

func (p AdaptivePolicy) waiting(s *Scenario, peak, requests float64) (string, float64) {
	return "queue", s.queueBound(p.Queue, p.MaxWait, peak, requests)
}

func (p TickerPolicy) waiting(s *Scenario, peak, requests float64) (string, float64) {
	return "queue", s.queueBound(p.Queue, p.MaxWait, peak, requests)
}

// waiting: a reservation waits at most MaxWait, so the bucket lends at
// most MaxWait's worth of tokens beyond its burst.
func (p TokenBucketPolicy) waiting(_ *Scenario, _, requests float64) (string, float64) {
	return "max_wait", min(requests, p.Rate*p.MaxWait.Seconds()+float64(max(p.Burst, 1)))
}

// queueBound bounds the requests in a queue: its bound when it has one, and
// what arrives within its longest wait (maxWait, or the client's timeout,
// which takes a request out of the queue), and every request of the run.
func (s *Scenario) queueBound(queue int, maxWait time.Duration, peak, requests float64) float64 {
	n := requests
	if queue != Unbounded {
		n = min(n, float64(queue))
	}
	if w := longestWait(maxWait, s.Load.Timeout); w > 0 {
		n = min(n, s.arrivingWithin(w, peak))
	}
	return n
}

// longestWait is how long a request may wait in a policy's queue: the
// shorter of max_wait and the client's timeout, 0 when neither is set.
func longestWait(maxWait, timeout time.Duration) time.Duration {
	switch {
	case maxWait == 0:
		return timeout
	case timeout == 0:
		return maxWait
	}
	return min(maxWait, timeout)
}

// arrivingWithin bounds the requests that arrive within any window of
// length w: the peak rate over it, every burst that fits in it, retries.
func (s *Scenario) arrivingWithin(w time.Duration, peak float64) float64 {
	l := &s.Load
	n := peak * w.Seconds()
	if b := l.Bursts; b.Size > 0 {
		bursts := float64(b.Count)
		if b.Every > 0 {
			bursts = min(bursts, float64(w/b.Every+1))
		}
		n += float64(b.Size) * bursts
	}
	return (n + 1) * float64(1+l.Retries.Max)
}

// overflow is the error of a run stopped by full, naming the field that
// let the requests pile up where most of them were.
func (e *engine) overflow(pi int) error {
	queued, atOrigin := e.pol.queued(), e.org.n+e.org.busy
	field, where := "load.rate", "waiting for clients' retries or in flight"
	p := e.sc.Policies[pi]
	switch qf, _ := p.waiting(e.sc, 0, 0); {
	case qf != "" && queued >= atOrigin && queued >= e.inFlight:
		field, where = fmt.Sprintf("policies[%d].%s", pi, qf), "queued in the policy"
	case e.org.n >= e.inFlight/2:
		field, where = "origin.queue", "queued at the origin"
	case p.Kind() == None:
		field, where = fmt.Sprintf("policies[%d].kind", pi), "in flight with no limit"
	}
	return bad(field, "more than %d requests alive at once at %v (most %s), more than a run may hold in memory: bound the queue, set a timeout or lower the load",
		maxLive, time.Duration(e.now), where)
}
