package concurrency

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

var t0 = time.Unix(1_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// script drives a Core through a sequence of steps, each at a virtual time in
// milliseconds, and records a transcript of what happened, so a test reads
// as the story it checks.
type script struct {
	t     *testing.T
	c     *Core
	names map[WaiterID]string
	log   []string
}

func newScript(t *testing.T, cfg Config) *script {
	t.Helper()
	c, err := NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &script{t: t, c: c, names: map[WaiterID]string{}}
}

func (s *script) events(ms int, evs []Event) {
	for _, e := range evs {
		if e.Admitted {
			s.log = append(s.log, fmt.Sprintf("%d:%s+", ms, s.names[e.Waiter]))
		} else {
			s.log = append(s.log, fmt.Sprintf("%d:%s-%s", ms, s.names[e.Waiter], e.Reason))
		}
	}
}

// arrive records "name+" (admitted), "name?" (queued) or "name-reason".
func (s *script) arrive(ms int, name string, deadlineMS int) Arrival {
	var dl time.Time
	if deadlineMS > 0 {
		dl = at(deadlineMS)
	}
	a, evs := s.c.Arrive(at(ms), dl)
	s.events(ms, evs)
	switch a.Verdict {
	case Admitted:
		s.log = append(s.log, fmt.Sprintf("%d:%s+", ms, name))
	case Queued:
		s.names[a.Waiter] = name
		s.log = append(s.log, fmt.Sprintf("%d:%s?", ms, name))
	case Rejected:
		s.log = append(s.log, fmt.Sprintf("%d:%s-%s", ms, name, a.Reason))
	}
	return a
}

func (s *script) release(ms int, latencyMS int) {
	s.events(ms, s.c.Release(at(ms), 1, sluice.Success, time.Duration(latencyMS)*time.Millisecond))
}

func (s *script) expire(ms int) { s.events(ms, s.c.Expire(at(ms))) }

func (s *script) setLimit(ms, n int) { s.events(ms, s.c.SetLimit(at(ms), n)) }

func (s *script) want(want string) {
	s.t.Helper()
	if got := strings.Join(s.log, " "); got != want {
		s.t.Errorf("transcript\n got: %s\nwant: %s", got, want)
	}
}

func TestCoreDisciplines(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		run  func(s *script)
		want string
	}{
		{"fifo serves oldest first", Config{Limit: 1, MaxQueue: 3},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)
				s.arrive(2, "c", 0)
				s.arrive(3, "d", 0)
				s.release(10, 10)
				s.release(20, 10)
				s.release(30, 10)
			},
			"0:a+ 1:b? 2:c? 3:d? 10:b+ 20:c+ 30:d+"},
		{"lifo serves newest first", Config{Limit: 1, MaxQueue: 3, Discipline: LIFO},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)
				s.arrive(2, "c", 0)
				s.arrive(3, "d", 0)
				s.release(10, 10)
				s.release(20, 10)
				s.release(30, 10)
			},
			"0:a+ 1:b? 2:c? 3:d? 10:d+ 20:c+ 30:b+"},
		{"no queue rejects with limit", Config{Limit: 1},
			func(s *script) { s.arrive(0, "a", 0); s.arrive(1, "b", 0) },
			"0:a+ 1:b-limit"},
		{"fifo full queue rejects the newcomer", Config{Limit: 1, MaxQueue: 1},
			func(s *script) { s.arrive(0, "a", 0); s.arrive(1, "b", 0); s.arrive(2, "c", 0) },
			"0:a+ 1:b? 2:c-queue_full"},
		{"lifo full queue rejects the oldest", Config{Limit: 1, MaxQueue: 2, Discipline: LIFO},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)
				s.arrive(2, "c", 0)
				s.arrive(3, "d", 0)
			},
			"0:a+ 1:b? 2:c? 3:b-queue_full 3:d?"},
		{"max wait expires at exactly arrival+MaxWait", Config{Limit: 1, MaxQueue: 5, MaxWait: 50 * time.Millisecond},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(10, "b", 0)
				s.arrive(20, "c", 0)
				s.expire(59)
				s.expire(60)
				s.release(69, 69)
				s.release(70, 1)
			},
			"0:a+ 10:b? 20:c? 60:b-queue_timeout 69:c+"},
		{"max wait in service times: none before a latency, then k mean service times at a standing queue", Config{Limit: 1, MaxQueue: 5, Discipline: LIFO, MaxWaitServices: 2},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)  // no latency seen yet: no bound
				s.release(10, 10)    // mean service time 10 ms
				s.arrive(12, "c", 0) // starts a burst: until 12 + 4 × 2 × 10 ms
				s.arrive(80, "d", 0) // 80 + 2 × 10 ms is later than the burst's 92
				s.expire(91)
				s.expire(92)
				s.arrive(95, "e", 0) // the queue has stood since 12: 2 × 10 ms
				s.expire(99)
				s.expire(100)
				s.expire(114)
				s.expire(115)
			},
			"0:a+ 1:b? 10:b+ 12:c? 80:d? 92:c-queue_timeout 95:e? 100:d-queue_timeout 115:e-queue_timeout"},
		{"max wait in service times: a LIFO eviction does not restart the standing clock", Config{Limit: 1, MaxQueue: 1, Discipline: LIFO, MaxWaitServices: 2},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.release(10, 10)    // mean service time 10 ms
				s.arrive(10, "x", 0) // holds the permit
				s.arrive(12, "b", 0) // starts a burst: until 12 + 4 × 2 × 10 ms
				s.arrive(50, "c", 0) // evicts b; the queue was never empty: until 92, not 130
				s.expire(91)
				s.expire(92)
			},
			"0:a+ 10:x+ 12:b? 50:b-queue_full 50:c? 92:c-queue_timeout"},
		{"max wait in service times: MaxWait shorter wins", Config{Limit: 1, MaxQueue: 5, MaxWait: 5 * time.Millisecond, MaxWaitServices: 2},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.release(10, 10)
				s.arrive(11, "b", 0)
				s.arrive(12, "c", 0)
				s.expire(17)
			},
			"0:a+ 11:b+ 12:c? 17:c-queue_timeout"},
		{"release expires overdue waiters before granting", Config{Limit: 1, MaxQueue: 5, MaxWait: 50 * time.Millisecond},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(10, "b", 0)
				s.arrive(30, "c", 0)
				s.release(65, 65)
			},
			"0:a+ 10:b? 30:c? 65:b-queue_timeout 65:c+"},
		{"codel: no standing queue allows waits up to interval", Config{Limit: 1, MaxQueue: 5, Discipline: CoDel},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.release(90, 90) // b waited 90ms: allowed, the queue is not standing yet
			},
			"0:a+ 0:b? 90:b+"},
		{"codel: standing queue sheds waits over target", Config{Limit: 1, MaxQueue: 5, Discipline: CoDel},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)  // may stay until max(0+5, 0+100) = 100
				s.arrive(97, "c", 0) // max(102, 100) = 102
				s.arrive(99, "d", 0) // 104
				s.expire(99)
				s.expire(100)
				s.expire(102)
				s.release(103, 103)
			},
			"0:a+ 0:b? 97:c? 99:d? 100:b-shed 102:c-shed 103:d+"},
		{"codel: an empty queue resets the interval", Config{Limit: 1, MaxQueue: 5, Discipline: CoDel},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.release(50, 50) // b admitted: the queue empties at 50
				s.arrive(60, "c", 0)
				s.expire(159) // c's bound is max(65, 160) = 160
				s.expire(160)
			},
			"0:a+ 0:b? 50:b+ 60:c? 160:c-shed"},
		{"codel: MaxWait shorter than the interval wins", Config{Limit: 1, MaxQueue: 5, Discipline: CoDel, MaxWait: 20 * time.Millisecond},
			func(s *script) { s.arrive(0, "a", 0); s.arrive(0, "b", 0); s.expire(20) },
			"0:a+ 0:b? 20:b-queue_timeout"},
		{"codel: custom target and interval", Config{Limit: 1, MaxQueue: 5, Discipline: CoDel, CoDelTarget: 2 * time.Millisecond, CoDelInterval: 10 * time.Millisecond},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.arrive(9, "c", 0) // max(11, 10)
				s.expire(10)
				s.expire(11)
			},
			"0:a+ 0:b? 9:c? 10:b-shed 11:c-shed"},
		{"adaptive lifo: fifo while the queue drains", Config{Limit: 1, MaxQueue: 5, Discipline: AdaptiveLIFO},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)
				s.arrive(2, "c", 0)
				s.release(50, 50)
			},
			"0:a+ 1:b? 2:c? 50:b+"},
		{"adaptive lifo: lifo once the queue stands", Config{Limit: 1, MaxQueue: 5, Discipline: AdaptiveLIFO},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(1, "b", 0)   // bound max(6, 101) = 101
				s.arrive(99, "c", 0)  // 104
				s.arrive(100, "d", 0) // 105
				s.release(101, 101)   // standing since 1: b shed at 101, then LIFO: d
				s.release(102, 1)     // c
			},
			"0:a+ 1:b? 99:c? 100:d? 101:b-shed 101:d+ 102:c+"},
		{"adaptive lifo: full queue in fifo mode rejects the newcomer", Config{Limit: 1, MaxQueue: 1, Discipline: AdaptiveLIFO},
			func(s *script) { s.arrive(0, "a", 0); s.arrive(1, "b", 0); s.arrive(2, "c", 0) },
			"0:a+ 1:b? 2:c-queue_full"},
		{"adaptive lifo: full queue in lifo mode rejects the oldest", Config{Limit: 1, MaxQueue: 2, Discipline: AdaptiveLIFO, CoDelTarget: 50 * time.Millisecond},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)   // bound 100
				s.arrive(90, "c", 0)  // bound 140
				s.arrive(100, "d", 0) // b expires first; room for d
				s.arrive(110, "e", 0) // standing queue (since 0): LIFO, c makes room
			},
			"0:a+ 0:b? 90:c? 100:b-shed 100:d? 110:c-queue_full 110:e?"},
		{"deadline already passed", Config{Limit: 1, MaxQueue: 5},
			func(s *script) { s.arrive(10, "a", 10) },
			"10:a-deadline"},
		{"deadline unknown wait: queued", Config{Limit: 1, MaxQueue: 5},
			func(s *script) { s.arrive(0, "a", 0); s.arrive(0, "b", 1) },
			"0:a+ 0:b?"},
		{"deadline sooner than estimated wait: rejected at once", Config{Limit: 2, MaxQueue: 5},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.release(100, 100) // mean service 100ms
				s.arrive(100, "c", 0)
				s.arrive(100, "d", 200) // place 1: wait 1*100/2 = 50ms, deadline in 100: queued
				s.arrive(100, "e", 199) // place 2: 100ms wait, deadline in 99: rejected
				s.arrive(100, "f", 201) // place 2, deadline in 101: queued
			},
			"0:a+ 0:b+ 100:c+ 100:d? 100:e-deadline 100:f?"},
		{"deadline in lifo counts place 1", Config{Limit: 1, MaxQueue: 5, Discipline: LIFO},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.release(10, 10)
				s.arrive(10, "b", 0)
				s.arrive(10, "c", 0)
				s.arrive(10, "d", 0)
				s.arrive(10, "e", 21) // newest is served first: 10ms wait fits
				s.arrive(10, "f", 19)
			},
			"0:a+ 10:b+ 10:c? 10:d? 10:e? 10:f-deadline"},
		{"deadline passed while queued: skipped at grant", Config{Limit: 1, MaxQueue: 5},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 30)
				s.arrive(0, "c", 0)
				s.release(40, 40)
			},
			"0:a+ 0:b? 0:c? 40:b-deadline 40:c+"},
		{"too little time left for the work: skipped at grant", Config{Limit: 1, MaxQueue: 5},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.release(20, 20) // a held its permit 20: so will the next
				s.arrive(20, "c", 55)
				s.arrive(20, "d", 0)
				s.release(40, 20) // c has 15 left, less than the 20 it needs
			},
			"0:a+ 0:b? 20:b+ 20:c? 20:d? 40:c-deadline 40:d+"},
		{"growing the limit grants at once", Config{Limit: 1, MaxQueue: 5},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.arrive(0, "c", 0)
				s.arrive(0, "d", 0)
				s.setLimit(5, 3)
			},
			"0:a+ 0:b? 0:c? 0:d? 5:b+ 5:c+"},
		{"shrinking the limit revokes nothing", Config{Limit: 3, MaxQueue: 5},
			func(s *script) {
				s.arrive(0, "a", 0)
				s.arrive(0, "b", 0)
				s.arrive(0, "c", 0)
				s.setLimit(1, 1)
				s.arrive(2, "d", 0)
				s.release(10, 10) // 2 in flight, limit 1: d waits
				s.release(11, 10) // 1 in flight
				s.release(12, 10) // 0: d admitted
			},
			"0:a+ 0:b+ 0:c+ 2:d? 12:d+"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript(t, tt.cfg)
			tt.run(s)
			s.want(tt.want)
		})
	}
}

func TestCoreRemove(t *testing.T) {
	s := newScript(t, Config{Limit: 1, MaxQueue: 1})
	s.arrive(0, "a", 0)
	b := s.arrive(0, "b", 0)
	s.arrive(0, "c", 0) // full
	if !s.c.Remove(b.Waiter) {
		t.Fatal("Remove(b) = false, want true")
	}
	if s.c.Remove(b.Waiter) {
		t.Error("second Remove(b) = true, want false")
	}
	d := s.arrive(1, "d", 0) // b's place is free at once; d reuses its slot
	if d.Waiter == b.Waiter {
		t.Error("a reused slot kept its WaiterID")
	}
	if s.c.Remove(b.Waiter) {
		t.Error("stale Remove(b) removed d")
	}
	s.release(2, 2)
	s.want("0:a+ 0:b? 0:c-queue_full 1:d? 2:d+")
	if got := s.c.Queued(); got != 0 {
		t.Errorf("Queued = %d, want 0", got)
	}
	if s.c.Remove(0) || s.c.Remove(WaiterID(1<<40|999)) {
		t.Error("Remove of a never-issued ID = true")
	}
}

func TestCoreNextExpiry(t *testing.T) {
	c, _ := NewCore(Config{Limit: 1, MaxQueue: 5})
	c.Arrive(at(0), time.Time{})
	c.Arrive(at(0), time.Time{})
	if _, ok := c.NextExpiry(); ok {
		t.Error("NextExpiry with no wait bound reported one")
	}
	c, _ = NewCore(Config{Limit: 1, MaxQueue: 5, MaxWait: time.Second})
	c.Arrive(at(0), time.Time{})
	if _, ok := c.NextExpiry(); ok {
		t.Error("NextExpiry with an empty queue reported one")
	}
	a, _ := c.Arrive(at(3), time.Time{})
	if got, ok := c.NextExpiry(); !ok || !got.Equal(at(1003)) || a.ExpiresIn != time.Second {
		t.Errorf("NextExpiry = %v, %v; ExpiresIn %v; want +1003ms, true, 1s", got.Sub(t0), ok, a.ExpiresIn)
	}
}

func TestCoreStats(t *testing.T) {
	s := newScript(t, Config{Limit: 1, MaxQueue: 1, MaxWait: 10 * time.Millisecond})
	s.arrive(0, "a", 0)
	s.arrive(0, "b", 0)
	s.arrive(0, "c", 0)
	s.expire(10)
	s.arrive(10, "d", 0)
	st := s.c.Stats()
	want := sluice.Stats{Limit: 1, InFlight: 1, Queued: 1, Admitted: 1}
	want.Rejected[sluice.ReasonQueueFull] = 1
	want.Rejected[sluice.ReasonQueueTimeout] = 1
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if tr := s.c.TryArrive(); tr.Verdict != Rejected || tr.Reason != sluice.ReasonLimit {
		t.Errorf("TryArrive with a queue = %+v, want ReasonLimit", tr)
	}
}

// recorder is an adaptive.Algorithm that records its samples and answers
// with a scripted limit.
type recorder struct {
	samples []adaptive.Sample
	next    int
}

func (r *recorder) Observe(_ time.Time, s adaptive.Sample) int {
	r.samples = append(r.samples, s)
	return r.next
}
func (r *recorder) Limit() int { return 2 }

func TestCoreAlgorithm(t *testing.T) {
	alg := &recorder{next: 3}
	c, err := NewCore(Config{Algorithm: alg, MaxQueue: 5})
	if err != nil {
		t.Fatal(err)
	}
	if c.Limit() != 2 {
		t.Fatalf("Limit = %d, want Algorithm.Limit() = 2", c.Limit())
	}
	a, _ := c.Arrive(at(0), time.Time{})
	b, _ := c.Arrive(at(0), time.Time{})
	w, _ := c.Arrive(at(0), time.Time{})
	if a.Token != 1 || b.Token != 2 || w.Verdict != Queued {
		t.Fatalf("tokens %d %d, third %v", a.Token, b.Token, w.Verdict)
	}
	c.Release(at(1), a.Token, sluice.Ignore, time.Millisecond)
	c.Cancel(at(1), 0)
	if len(alg.samples) != 0 {
		t.Fatalf("Ignore/Cancel fed samples: %+v", alg.samples)
	}
	c, _ = NewCore(Config{Algorithm: alg, MaxQueue: 5})
	a, _ = c.Arrive(at(0), time.Time{})
	c.Arrive(at(0), time.Time{})
	w, _ = c.Arrive(at(0), time.Time{})
	w2, _ := c.Arrive(at(0), time.Time{})
	evs := c.Release(at(7), a.Token, sluice.Dropped, 7*time.Millisecond)
	// One permit freed and the limit grew from 2 to 3: both waiters in.
	if len(evs) != 2 || evs[0].Waiter != w.Waiter || evs[1].Waiter != w2.Waiter || c.Limit() != 3 {
		t.Errorf("events %+v, limit %d; want both waiters admitted, limit 3", evs, c.Limit())
	}
	// Two waited when the permit came back: the limit held them.
	want := adaptive.Sample{Latency: 7 * time.Millisecond, InFlight: 1, Outcome: sluice.Dropped, Waiting: 2}
	if len(alg.samples) != 1 || alg.samples[0] != want {
		t.Errorf("samples %+v, want [%+v]", alg.samples, want)
	}
	alg.next = -5
	c.Release(at(8), 3, sluice.Success, time.Millisecond)
	if c.Limit() != 1 {
		t.Errorf("limit after the algorithm answered -5 = %d, want 1 (clamped)", c.Limit())
	}
}

// A waiter queued before the first latency has no MaxWaitServices bound.
// Newcomers may not expire before it (the head expires first), so unless
// it gets one once the mean service time is known, every later waiter
// inherits "no bound" from the tail, and a queue that stands from the
// start is never held to MaxWaitServices: the overload it is for.
func TestCoreMaxWaitServicesQueuedBeforeFirstLatency(t *testing.T) {
	for _, d := range []Discipline{FIFO, LIFO} {
		t.Run(d.String(), func(t *testing.T) {
			s := newScript(t, Config{Limit: 1, MaxQueue: 5, Discipline: d, MaxWaitServices: 1})
			s.arrive(0, "a", 0)
			s.arrive(1, "b", 0) // no latency seen yet: no bound so far
			s.arrive(2, "c", 0)
			s.release(10, 10) // S = 10 ms; the queue is non-empty since 1: until max(t+10, 1+40)
			a := s.arrive(12, "d", 0)
			if a.ExpiresIn != 29*time.Millisecond {
				t.Errorf("d, queued at 12 with S known: ExpiresIn = %v, want 29ms (until 41)", a.ExpiresIn)
			}
			s.expire(40)
			s.expire(41)
			if d == FIFO {
				s.want("0:a+ 1:b? 2:c? 10:b+ 12:d? 41:c-queue_timeout 41:d-queue_timeout")
			} else {
				s.want("0:a+ 1:b? 2:c? 10:c+ 12:d? 41:b-queue_timeout 41:d-queue_timeout")
			}
		})
	}
}
