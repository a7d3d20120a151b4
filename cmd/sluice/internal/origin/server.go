package origin

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/sim"
)

// ReasonHeader is the response field that says why the origin did not
// serve a request (ReasonQueueFull, ReasonTimeout, ReasonClosed); sluice
// load counts rejections by it.
const ReasonHeader = "Sluice-Reason"

// The reasons a Server writes in ReasonHeader.
const (
	ReasonQueueFull = "origin-queue-full" // 503: every worker busy, the queue full
	ReasonTimeout   = "origin-timeout"    // 504: held for the origin's Timeout
	ReasonClosed    = "origin-closed"     // 503: the Server was closed
	ReasonError     = "origin-error"      // 500: served, drawn as an error (ErrorRate)
)

// Server is the modeled origin as an http.Handler. It is safe for
// concurrent use. Its clock (for Changes) starts at New.
type Server struct {
	cfg   Config // validated, durations scaled
	start time.Time
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	workers int
	svc     sim.Sampler
	rng     *rand.Rand // service times: sim.ServiceRand
	errRng  *rand.Rand // ErrorRate's draws, apart so the service times stay the simulator's
	busy    int
	queue   []*waiter // FIFO; entries that left early are skipped (gone), and dropped in leave
	live    int       // queue entries still waiting
	changes []*time.Timer
	applied int // Changes applied so far, in order: see applyThrough

	inside, maxInside                 atomic.Int64
	served, errors, refused, timedOut atomic.Uint64

	reg     *prometheus.Registry
	latency prometheus.Histogram
}

// waiter is a queued request. granted is set, under the Server's lock,
// when a worker is handed to it; gone when it left the queue first.
type waiter struct {
	ch      chan struct{}
	granted bool
	// start is when the worker handed to it became free: its work is
	// timed from then, not from when its goroutine woke up (see release).
	start time.Time
	gone  bool
}

// New validates cfg and returns a Server whose clock starts now. Call
// Close when done with it.
func New(cfg Config) (*Server, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     c,
		start:   time.Now(),
		done:    make(chan struct{}),
		workers: c.Workers,
		svc:     sim.NewSampler(c.Service),
		rng:     sim.ServiceRand(c.Seed),
		errRng:  rand.New(rand.NewPCG(c.Seed, 3)),
	}
	s.initMetrics()
	s.mu.Lock()
	for i, ch := range c.Changes {
		s.changes = append(s.changes, time.AfterFunc(ch.At, func() { s.applyThrough(i) }))
	}
	s.mu.Unlock()
	return s, nil
}

// Close stops the changes and answers every request still waiting for a
// worker or in service with 503 at once. It does not close any listener:
// the http.Server serving s is the caller's. Close is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.mu.Lock()
		for _, t := range s.changes {
			t.Stop()
		}
		s.mu.Unlock()
	})
}

// ServeHTTP serves one request as the model says: at once, after a wait
// in the queue, or not at all.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	n := s.inside.Add(1)
	for m := s.maxInside.Load(); n > m && !s.maxInside.CompareAndSwap(m, n); m = s.maxInside.Load() {
	}
	defer s.inside.Add(-1)

	code, reason := s.handle(arrived)
	s.latency.Observe(time.Since(arrived).Seconds())
	if reason != "" {
		w.Header().Set(ReasonHeader, reason)
	}
	w.Header()["Content-Type"] = textPlain
	w.WriteHeader(code)
	_, _ = w.Write(body(code))
}

// textPlain and the bodies are shared, so that an answer allocates no
// header value or body of its own.
var (
	textPlain = []string{"text/plain; charset=utf-8"}
	bodies    = func() map[int][]byte {
		m := map[int][]byte{}
		for _, c := range []int{200, 500, 502, 503, 504} {
			m[c] = []byte(http.StatusText(c) + "\n")
		}
		return m
	}()
)

func body(code int) []byte {
	if b, ok := bodies[code]; ok {
		return b
	}
	return []byte(http.StatusText(code) + "\n")
}

// handle waits for a worker and does the work; it returns the answer.
func (s *Server) handle(arrived time.Time) (code int, reason string) {
	var deadline <-chan time.Time
	if s.cfg.Timeout > 0 {
		t := time.NewTimer(s.cfg.Timeout - time.Since(arrived))
		defer t.Stop()
		deadline = t.C
	}

	s.mu.Lock()
	w, ok := s.admit()
	s.mu.Unlock()
	if !ok {
		s.refused.Add(1)
		if s.closed() {
			return http.StatusServiceUnavailable, ReasonClosed
		}
		return http.StatusServiceUnavailable, ReasonQueueFull
	}
	if w != nil {
		select {
		case <-w.ch:
		case <-deadline:
			if s.leave(w) {
				s.timedOut.Add(1)
				return http.StatusGatewayTimeout, ReasonTimeout
			}
			// Granted as the deadline passed: the answer is still late.
			<-w.ch
			s.release(time.Now())
			s.timedOut.Add(1)
			return http.StatusGatewayTimeout, ReasonTimeout
		case <-s.done:
			if s.leave(w) {
				return http.StatusServiceUnavailable, ReasonClosed
			}
			<-w.ch
		}
	}
	started := time.Now()
	if w != nil && w.start.After(arrived) {
		// From when the worker was free, but never before the request
		// arrived: a late release must not serve a newcomer early.
		started = w.start
	}

	s.mu.Lock()
	work := s.svc.Draw(s.rng)
	fail := s.cfg.ErrorRate > 0 && s.errRng.Float64() < s.cfg.ErrorRate
	s.mu.Unlock()
	// The work is timed from when the worker became free, and the worker
	// is given back at when the work should have ended: a timer that fires
	// late on a busy machine delays this answer, not every request after
	// it, so the origin keeps the capacity the model gives it.
	done := started.Add(work)
	t := time.NewTimer(time.Until(done))
	defer t.Stop()
	select {
	case <-t.C:
		s.release(done)
	case <-deadline:
		// The answer goes now; the worker stays busy until the work is done.
		time.AfterFunc(time.Until(done), func() { s.release(done) })
		s.timedOut.Add(1)
		return http.StatusGatewayTimeout, ReasonTimeout
	case <-s.done:
		s.release(time.Now())
		return http.StatusServiceUnavailable, ReasonClosed
	}
	if fail {
		s.errors.Add(1)
		return http.StatusInternalServerError, ReasonError
	}
	s.served.Add(1)
	return http.StatusOK, ""
}

// admit takes a worker (nil, true), a place in the queue (w, true), or
// refuses (nil, false). s.mu is held.
func (s *Server) admit() (*waiter, bool) {
	if s.closed() {
		return nil, false
	}
	if s.busy < s.workers {
		s.busy++
		return nil, true
	}
	if s.cfg.Queue != -1 && s.live >= s.cfg.Queue {
		return nil, false
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	s.queue = append(s.queue, w)
	s.live++
	return w, true
}

// closed reports whether Close was called.
func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// leave takes w out of the queue; false if a worker was handed to it
// first, in which case it holds that worker.
func (s *Server) leave(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		return false
	}
	w.gone = true
	s.live--
	// While every worker stays busy nothing pops the queue, and a
	// request that times out would leave its entry behind: drop the
	// entries that left once they outnumber those still waiting, so that
	// the queue holds at most about twice its waiters (amortized O(1):
	// at least live+64 leaves between two compactions).
	if len(s.queue) > 2*s.live+64 {
		q := make([]*waiter, 0, s.live)
		for _, x := range s.queue {
			if !x.gone {
				q = append(q, x)
			}
		}
		s.queue = q
	}
	return true
}

// release gives a worker back, free since at, and hands free workers to
// the queue.
func (s *Server) release(at time.Time) {
	s.mu.Lock()
	s.busy--
	s.startQueued(at)
	s.mu.Unlock()
}

// startQueued hands free workers, free since at, to queued requests,
// oldest first. s.mu is held.
func (s *Server) startQueued(at time.Time) {
	for s.busy < s.workers && s.live > 0 {
		w := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if w.gone {
			continue
		}
		s.live--
		s.busy++
		w.granted = true
		w.start = at
		w.ch <- struct{}{}
	}
	if s.live == 0 {
		s.queue = s.queue[:0:0] // drop the entries that left, and the array
	}
}

// applyThrough applies the changes up to Changes[i], in order, that are
// not applied yet. Each change has a timer, and their callbacks race for
// the lock: a change's timer may run after a later one's (at the same
// time, or a moment later). Changes are in time order, so when Changes[i]
// is due every change before it is too, and applying them in the list's
// order, as the simulator does, leaves the last one in force.
func (s *Server) applyThrough(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; s.applied <= i; s.applied++ {
		ch := s.cfg.Changes[s.applied]
		if ch.Workers > 0 {
			s.workers = ch.Workers
		}
		if ch.Service.Kind != "" {
			s.svc = sim.NewSampler(ch.Service)
		}
	}
	s.startQueued(time.Now())
}

// Stats is a snapshot of a Server's state and counts.
type Stats struct {
	Workers  int   `json:"workers"`   // workers now (Changes may alter them)
	Busy     int   `json:"busy"`      // requests in service
	Queued   int   `json:"queued"`    // requests waiting for a worker
	InFlight int64 `json:"in_flight"` // requests inside the handler: busy, queued, answering
	// MaxInFlight is the most requests that were inside the handler at
	// once since New: what a limiter in front of the origin let through.
	MaxInFlight int64  `json:"max_in_flight"`
	Served      uint64 `json:"served"`    // answered 200
	Errors      uint64 `json:"errors"`    // answered 500 (ErrorRate)
	Refused     uint64 `json:"refused"`   // answered 503: the queue was full (or the Server closed)
	TimedOut    uint64 `json:"timed_out"` // answered 504: the origin's Timeout
}

// Stats returns the Server's state and counts now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{Workers: s.workers, Busy: s.busy, Queued: s.live}
	s.mu.Unlock()
	st.InFlight = s.inside.Load()
	st.MaxInFlight = s.maxInside.Load()
	st.Served = s.served.Load()
	st.Errors = s.errors.Load()
	st.Refused = s.refused.Load()
	st.TimedOut = s.timedOut.Load()
	return st
}

// Capacity is the completion rate the origin sustains now, in requests per
// second: workers over the mean service time (Little's law).
func (s *Server) Capacity() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.workers) / s.svc.Mean().Seconds()
}
