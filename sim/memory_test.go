package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateRefusesQueueTooLargeForMemory: issue 7's 10-line scenario
// (1e8 requests per second for 100 ms, five policies with a limit of 1 and
// an unbounded queue) passed the request bound and took 44 s and 3.1 GB.
// Validate refuses it at once, naming the queue.
func TestValidateRefusesQueueTooLargeForMemory(t *testing.T) {
	s := Scenario{
		Duration: 100 * ms,
		Interval: 100 * ms,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 1e8},
	}
	for range 5 {
		s.Policies = append(s.Policies, ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{Queue: Unbounded}})
	}
	err := s.Validate()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "policies[0].queue" || !strings.Contains(fe.Problem, "in memory") {
		t.Fatalf("Validate = %v, want a policies[0].queue error about memory", err)
	}

	// What makes it fit: a bounded queue, a max_wait, or a client timeout
	// that takes waiters out of the queue.
	for name, edit := range map[string]func(p *ConcurrencyPolicy, l *Load){
		"queue":    func(p *ConcurrencyPolicy, _ *Load) { p.Queue = 1000 },
		"max_wait": func(p *ConcurrencyPolicy, _ *Load) { p.MaxWait = 5 * ms },
		"timeout":  func(_ *ConcurrencyPolicy, l *Load) { l.Timeout = 5 * ms },
	} {
		s2 := s
		p := s.Policies[0].(ConcurrencyPolicy)
		edit(&p, &s2.Load)
		s2.Policies = []Policy{p}
		if err := s2.Validate(); err != nil {
			t.Errorf("with %s: %v", name, err)
		}
	}

	tb := Scenario{Duration: 100 * ms, Interval: 100 * ms, Origin: s.Origin, Load: s.Load,
		Policies: []Policy{TokenBucketPolicy{Rate: 1e8, MaxWait: time.Second}}}
	if err := tb.Validate(); !errors.As(err, &fe) || fe.Field != "policies[0].max_wait" {
		t.Errorf("token bucket lending 1e8 tokens: Validate = %v, want a policies[0].max_wait error", err)
	}
}

// TestRunStopsWhenRequestsPileUp: what Validate cannot bound (an origin
// whose unbounded queue grows behind no limit) stops the run when more
// than maxLive requests are alive, with an error naming the field.
func TestRunStopsWhenRequestsPileUp(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 200_000},
		Policies: []Policy{NonePolicy{}},
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("the scenario should pass Validate: %v", err)
	}
	_, err := Run(s)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "origin.queue" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Run = %v, want an origin.queue error", err)
	}
}

// TestOriginQueueHoldsOnlyWaiters: the origin's queue takes the memory of
// the requests waiting in it, not of every request that ever timed out
// there. One worker busy for an hour, a queue of 100 and a timeout of
// 1 ms: 100,000 requests pass through the queue, 100 at most wait at once.
func TestOriginQueueHoldsOnlyWaiters(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 1, Queue: 100, Timeout: ms, Service: Dist{Kind: Constant, Mean: time.Hour}},
		Load:     Load{Rate: 10_000},
		Policies: []Policy{NonePolicy{}},
	}
	e := runEngine(t, s)
	if o := &e.org; len(o.q) > 256 {
		t.Errorf("origin queue: a ring of %d for %d waiting; want one of at most 256", len(o.q), o.n)
	}
}

// TestTickerQueueHoldsOnlyWaiters: the ticker's queue takes the memory of
// the requests waiting in it, not of every request that ever waited, even
// when it never empties: 99,000 requests in 10 s at twice the ticker's
// rate, about 100 waiting at a time (10 ms of arrivals).
func TestTickerQueueHoldsOnlyWaiters(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 9_900},
		Policies: []Policy{TickerPolicy{Rate: 5_000, Burst: 10, Queue: Unbounded, MaxWait: 10 * ms}},
	}
	e := runEngine(t, s)
	if g := e.pol.(*tickerGate); cap(g.q) > 1024 || cap(g.qgen) > 1024 {
		t.Errorf("ticker queue: %d entries (%d of them gone) in slices of %d for %d waiting; want at most 1024",
			len(g.q), g.qhead, cap(g.q), g.queued())
	}
}

// TestEventsHeldOnlyForLiveRequests: a client deadline or an origin
// timeout whose request has been answered has nothing left to do, and
// does not keep memory until its time comes. With deadlines of an hour,
// 100,000 requests in 10 s, each answered in 1 ms or refused and retried
// (a retry's deadline is on the heap), about 10 alive at a time. Kept,
// the events of every request answered within the hour would grow the
// memory with each request the run sent, not with those alive.
func TestEventsHeldOnlyForLiveRequests(t *testing.T) {
	s := Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 10, Timeout: time.Hour, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 10_000, Timeout: time.Hour, Retries: Retries{Max: 1}},
		Policies: []Policy{NonePolicy{}},
	}
	e := runEngine(t, s)
	if s := e.m.summary(); s.Retries < 10_000 {
		t.Fatalf("%d retries, want many", s.Retries)
	}
	if len(e.dls.buf) > 1024 || len(e.otos.buf) > 1024 || cap(e.h) > 1024 {
		t.Errorf("events held: %d client deadlines (in %d), %d origin timeouts (in %d), %d on the heap (in %d); want at most 1024 of each",
			e.dls.n, len(e.dls.buf), e.otos.n, len(e.otos.buf), len(e.h), cap(e.h))
	}
}

// runEngine validates s and runs its first policy to the end, for the
// tests that read the engine's state after the run.
func runEngine(t *testing.T, s Scenario) *engine {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(&s, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.run()
	return e
}
