package origin

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sim"
)

// call serves one request through the handler and reports the status and
// when (since start) it was answered.
func call(s *Server, start time.Time) (int, string, time.Duration) {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return rec.Code, rec.Header().Get(ReasonHeader), time.Since(start)
}

type answer struct {
	code   int
	reason string
	at     time.Duration
}

// burst sends n requests at once and returns their answers, sorted by
// arrival order of the goroutines' start (each goroutine waits for the
// previous one to be inside the handler).
func burst(t *testing.T, s *Server, n int) []answer {
	t.Helper()
	start := time.Now()
	out := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, r, at := call(s, start)
			out[i] = answer{c, r, at}
		})
		synctest.Wait() // request i is queued or in service before i+1 arrives
	}
	wg.Wait()
	return out
}

func TestWorkersAndQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Origin: sim.Origin{Workers: 2, Queue: 1, Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := burst(t, s, 4)
		want := []answer{{200, "", time.Second}, {200, "", time.Second}, {200, "", 2 * time.Second}, {503, ReasonQueueFull, 0}}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("request %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		st := s.Stats()
		if st.Served != 3 || st.Refused != 1 || st.MaxInFlight != 4 || st.InFlight != 0 || st.Busy != 0 || st.Queued != 0 {
			t.Errorf("stats: %+v", st)
		}
	})
}

func TestNoQueueAndUnbounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			queue   int
			refused uint64
			last    time.Duration
		}{{0, 2, time.Second}, {sim.Unbounded, 0, 2 * time.Second}} {
			s, err := New(Config{Origin: sim.Origin{Workers: 2, Queue: tc.queue, Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}}})
			if err != nil {
				t.Fatal(err)
			}
			got := burst(t, s, 4)
			if st := s.Stats(); st.Refused != tc.refused || st.Served != 4-tc.refused {
				t.Errorf("queue %d: stats %+v", tc.queue, st)
			}
			var last time.Duration
			for _, a := range got {
				last = max(last, a.at)
			}
			if last != tc.last {
				t.Errorf("queue %d: last answer at %v, want %v", tc.queue, last, tc.last)
			}
			s.Close()
		}
	})
}

// TestSlowdown is seed 003's change, scaled by 0.05: 1 s of work becomes
// 50 ms, and at 60 s (3 s scaled) 2 s (100 ms).
func TestSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{TimeScale: 0.05, Origin: sim.Origin{Workers: 7, Queue: 100,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Second},
			Changes: []sim.Change{{At: 60 * time.Second, Service: sim.Dist{Kind: sim.Constant, Mean: 2 * time.Second}}}}}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if c := s.Capacity(); c != 140 {
			t.Errorf("capacity before the change: %v, want 7/50ms = 140", c)
		}
		if _, _, at := call(s, time.Now()); at != 50*time.Millisecond {
			t.Errorf("before the change: %v, want 50ms", at)
		}
		time.Sleep(3 * time.Second)
		if _, _, at := call(s, time.Now()); at != 100*time.Millisecond {
			t.Errorf("after the change: %v, want 100ms", at)
		}
		if c := s.Capacity(); c != 70 {
			t.Errorf("capacity after the change: %v, want 70", c)
		}
	})
}

func TestWorkersChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Origin: sim.Origin{Workers: 1, Queue: -1,
			Service: sim.Dist{Kind: sim.Constant, Mean: 10 * time.Second},
			Changes: []sim.Change{{At: time.Second, Workers: 3}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := burst(t, s, 3)
		// The two queued requests start when the workers arrive at 1 s.
		for i, want := range []time.Duration{10 * time.Second, 11 * time.Second, 11 * time.Second} {
			if got[i].at != want {
				t.Errorf("request %d answered at %v, want %v", i, got[i].at, want)
			}
		}
	})
}

func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Origin: sim.Origin{Workers: 1, Queue: 5, Timeout: 500 * time.Millisecond,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := burst(t, s, 2)
		for i, a := range got {
			if a != (answer{504, ReasonTimeout, 500 * time.Millisecond}) {
				t.Errorf("request %d: %+v, want 504 at 500ms", i, a)
			}
		}
		// The first keeps its worker until its work is done at 1 s; the
		// second left the queue.
		if st := s.Stats(); st.Busy != 1 || st.Queued != 0 || st.TimedOut != 2 {
			t.Errorf("at 500ms: %+v", st)
		}
		time.Sleep(600 * time.Millisecond)
		if st := s.Stats(); st.Busy != 0 {
			t.Errorf("at 1.1s: %+v, want the worker back", st)
		}
	})
}

func TestErrorRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{ErrorRate: 0.25, Seed: 1, Origin: sim.Origin{Workers: 1000,
			Service: sim.Dist{Kind: sim.Exponential, Mean: time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		burst(t, s, 1000)
		st := s.Stats()
		if st.Errors+st.Served != 1000 || st.Errors < 200 || st.Errors > 300 {
			t.Errorf("1000 requests at error rate 0.25: %+v", st)
		}
	})
}

func TestCloseEndsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Origin: sim.Origin{Workers: 1, Queue: 1, Service: sim.Dist{Kind: sim.Constant, Mean: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := make([]answer, 2)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				c, r, at := call(s, start)
				got[i] = answer{c, r, at}
			})
		}
		synctest.Wait()
		s.Close()
		wg.Wait()
		for _, a := range got {
			if a != (answer{503, ReasonClosed, 0}) {
				t.Errorf("after Close: %+v", a)
			}
		}
		if time.Since(start) != 0 {
			t.Errorf("Close took %v", time.Since(start))
		}
		if code, _, _ := call(s, start); code != 503 {
			t.Errorf("a request after Close: %d, want 503", code)
		}
	})
}

func TestDistributions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, d := range []sim.Dist{
			{Kind: sim.Exponential, Mean: 10 * time.Millisecond},
			{Kind: sim.Lognormal, Mean: 10 * time.Millisecond, Sigma: 0.5},
			{Kind: sim.Bimodal, Mean: 5 * time.Millisecond, Tail: 55 * time.Millisecond, TailFraction: 0.1},
		} {
			s, err := New(Config{Seed: 7, Origin: sim.Origin{Workers: 4000, Service: d}})
			if err != nil {
				t.Fatal(err)
			}
			got := burst(t, s, 4000)
			var sum time.Duration
			for _, a := range got {
				sum += a.at
			}
			// Every distribution has a mean of 10 ms: within 5% over 4000 draws.
			if mean := sum / 4000; mean < 9500*time.Microsecond || mean > 10500*time.Microsecond {
				t.Errorf("%s: mean service time %v, want 10ms ± 5%%", d.Kind, mean)
			}
			s.Close()
		}
	})
}

func TestConfigErrors(t *testing.T) {
	ok := sim.Origin{Workers: 1, Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"origin.workers", func(c *Config) { c.Workers = 0 }},
		{"origin.queue", func(c *Config) { c.Queue = -2 }},
		{"origin.timeout", func(c *Config) { c.Timeout = -1 }},
		{"origin.service.kind", func(c *Config) { c.Service.Kind = "gamma" }},
		{"origin.service.mean", func(c *Config) { c.Service.Mean = 0 }},
		{"origin.service.sigma", func(c *Config) { c.Service.Sigma = 2 }},
		{"origin.service.sigma", func(c *Config) { c.Service = sim.Dist{Kind: sim.Lognormal, Mean: time.Second, Sigma: 3} }},
		{"origin.service.tail", func(c *Config) { c.Service.Tail = time.Second }},
		{"origin.service.tail_fraction", func(c *Config) { c.Service.TailFraction = 0.5 }},
		{"origin.service.tail_fraction", func(c *Config) { c.Service.TailFraction = math.NaN() }},
		{"origin.changes[0]", func(c *Config) { c.Changes = []sim.Change{{At: time.Second}} }},
		{"origin.changes[1].at", func(c *Config) {
			c.Changes = []sim.Change{{At: 2 * time.Second, Workers: 2}, {At: time.Second, Workers: 3}}
		}},
		{"timescale", func(c *Config) { c.TimeScale = -1 }},
		// Scaled past what a time.Duration holds, they wrapped negative:
		// the timeout was off and the change fired at once.
		{"origin.timeout", func(c *Config) { c.TimeScale, c.Timeout = 1000, 10000*time.Hour }},
		{"origin.changes[0].at", func(c *Config) {
			c.TimeScale, c.Changes = 1000, []sim.Change{{At: 10000 * time.Hour, Workers: 2}}
		}},
		{"error_rate", func(c *Config) { c.ErrorRate = 1.5 }},
	} {
		c := Config{Origin: ok}
		tc.edit(&c)
		_, err := New(c)
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	if _, err := New(Config{Origin: ok}); err != nil {
		t.Errorf("valid config: %v", err)
	}
	// 2562h × 1000 is just under the longest time.Duration, 2562047h.
	long := Config{Origin: ok, TimeScale: 1000}
	long.Timeout = 2562 * time.Hour
	if s, err := New(long); err != nil || s.cfg.Timeout != 2562000*time.Hour {
		t.Errorf("timeout 2562h at timescale 1000: %v", err)
	} else {
		s.Close()
	}
}

var _ http.Handler = (*Server)(nil)

// TestQueueBoundedByWaiters: requests that leave the queue (the origin's
// Timeout) while every worker stays busy must not pile up in it: each
// arrival would otherwise add an entry that only a free worker removes.
func TestQueueBoundedByWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queue = 4
		s, err := New(Config{Origin: sim.Origin{Workers: 1, Queue: queue, Timeout: time.Second,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var wg sync.WaitGroup
		wg.Go(func() { call(s, time.Now()) }) // holds the worker for an hour
		synctest.Wait()
		for round := range 200 {
			for range queue {
				wg.Go(func() {
					if code, reason, _ := call(s, time.Now()); code != 504 || reason != ReasonTimeout {
						t.Errorf("round %d: %d %q, want 504 %s", round, code, reason, ReasonTimeout)
					}
				})
			}
			synctest.Wait()
			time.Sleep(time.Second) // every one of them times out and leaves
			synctest.Wait()
			s.mu.Lock()
			n, live := len(s.queue), s.live
			s.mu.Unlock()
			if live != 0 || n > 2*queue+64 {
				t.Fatalf("round %d: %d entries in the queue for %d waiters", round, n, live)
			}
		}
		s.Close()
		wg.Wait()
	})
}

// TestClosedAnswersClosed: a request that arrives after Close is told the
// origin closed, on a real socket, not that its queue was full.
func TestClosedAnswersClosed(t *testing.T) {
	s, err := New(Config{Origin: sim.Origin{Workers: 1, Queue: 10,
		Service: sim.Dist{Kind: sim.Constant, Mean: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	s.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(ReasonHeader); resp.StatusCode != 503 || got != ReasonClosed {
		t.Errorf("a request after Close: %d %s, want 503 %s", resp.StatusCode, got, ReasonClosed)
	}
}

// TestTinyTimeoutStaysOn: a timeout that TimeScale shrinks below a
// nanosecond is the shortest timeout, not none (Timeout 0), as a service
// time so scaled is the shortest service time.
func TestTinyTimeoutStaysOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{TimeScale: 0.5, Origin: sim.Origin{Workers: 1, Timeout: time.Nanosecond,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if code, reason, at := call(s, time.Now()); code != 504 || at > time.Nanosecond {
			t.Errorf("timeout 1ns at timescale 0.5: %d %q at %v, want 504 at once", code, reason, at)
		}
	})
}
