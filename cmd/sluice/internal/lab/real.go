package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/cmd/sluice/internal/origin"
	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sim"
)

// ErrNotOnSockets marks a policy the load generator cannot play: sluice
// load does not retry, so a scenario whose clients retry runs on sockets
// only for the policies that never fail a request (no retry would happen).
var ErrNotOnSockets = errors.New("not run on sockets")

// RunReal runs every policy of s, at once or one at a time, each on loopback sockets of its
// own: an origin (package origin, the simulator's model on a real clock),
// the policy in front of it through the httplimit middleware, and an
// open-loop load generator (package load) playing s.Load. It reports them
// in the simulator's model. s is already scaled; within is the report's
// "served within" bound.
func RunReal(ctx context.Context, s sim.Scenario, within time.Duration, oneAtATime bool) (*report.Report, error) {
	interval := s.Interval
	if interval == 0 {
		interval = time.Second
	}
	r := &report.Report{
		Version: report.Version, Scenario: s.Name, Seed: s.Seed,
		DurationS: s.Duration.Seconds(), IntervalS: interval.Seconds(),
	}
	results := make([]*report.Policy, len(s.Policies))
	errs := make([]error, len(s.Policies))
	var wg sync.WaitGroup
	for i := range s.Policies {
		if oneAtATime {
			runtime.GC() // what the previous policy left is not this one's
			if ctx.Err() == nil {
				results[i], errs[i] = runPolicy(ctx, s, i, interval, within)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runPolicy(ctx, s, i, interval, within)
		}()
	}
	wg.Wait()
	var failed []error
	for i, p := range results {
		if errs[i] != nil {
			if !errors.Is(errs[i], ErrNotOnSockets) {
				failed = append(failed, fmt.Errorf("%s: %w", s.Policies[i].Label(), errs[i]))
			}
			continue
		}
		if p != nil { // nil: not run, the lab was stopped first
			r.Policies = append(r.Policies, *p)
		}
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, errors.Join(failed...)
}

// runPolicy runs policy i of s on its own origin and listener.
func runPolicy(ctx context.Context, s sim.Scenario, i int, interval, within time.Duration) (*report.Policy, error) {
	p := s.Policies[i]
	if s.Load.Retries != (sim.Retries{}) {
		// sluice load does not retry. A policy that lets every request
		// fail at the origin depends on the retries: simulator only. The
		// others run without them; where a retry would have mattered, the
		// agreement with the simulator shows it.
		if p.Kind() == sim.None {
			return nil, fmt.Errorf("%w: its clients retry, and sluice load does not", ErrNotOnSockets)
		}
		s.Load.Retries = sim.Retries{}
	}
	org, err := origin.New(originConfig(s))
	if err != nil {
		return nil, err
	}
	defer org.Close()
	b, err := buildPolicy(p)
	if err != nil {
		return nil, err
	}
	defer b.close()

	fr := &front{timeout: s.Load.Timeout, within: within, from: s.Warmup, to: s.Duration,
		rejections: hdrhistogram.New(1, 60_000_000, 3)}
	fr.stop, fr.cancel = context.WithCancel(ctx)
	defer fr.cancel()
	fr.inner = org
	var h http.Handler = http.HandlerFunc(fr.admitted)
	var mw *httplimit.Handler
	if b.limiter != nil {
		// The scenario's policy decides how long and how many wait; the
		// middleware's own guards (1 s, 1024 waiters by default, for
		// production) would be a second policy the simulator does not
		// run. They are set past anything the run can reach.
		mw, err = httplimit.New(h, httplimit.Config{Limiter: b.limiter, NoWait: b.noWait, OnReject: onReject,
			MaxWait: s.Duration + s.Load.Timeout + time.Minute, MaxWaiting: maxWaiting})
		if err != nil {
			return nil, err
		}
		h = mw
	}
	fr.policy = h

	ln, err := listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// IdleTimeout closes the connections a burst opened once it is over, so
	// that five policies under load do not run the process out of files.
	srv := &http.Server{Handler: fr, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // ends with Close below
	}()
	defer func() {
		// srv.Close does not wait for the handlers, and the front
		// detaches them from their connections: they are cancelled here
		// and waited for, so that none outlives the run (a request
		// waiting for a ticker's token would otherwise wait out its
		// client's timeout, or for ever without one).
		fr.close()
		org.Close() // answers waiting requests at once, so Close does not wait for work
		_ = srv.Close()
		<-served
		fr.handlers.Wait()
	}()

	// Gauges: the limit, in flight and queue, sampled at each interval's
	// end, and the origin's capacity and completions.
	g := &gauges{every: interval}
	g.start(func() gaugeSample {
		st := org.Stats()
		gs := gaugeSample{capacity: org.Capacity(), busy: st.Busy, queue: st.Queued, served: st.Served + st.Errors}
		if b.limiter != nil {
			ls := b.limiter.Stats()
			gs.limit, gs.inFlight, gs.queued = ls.Limit, ls.InFlight, ls.Queued
		}
		return gs
	})
	res, err := load.Run(ctx, loadConfig(s, "http://"+ln.Addr().String()+"/", interval))
	samples := g.stop()
	if err != nil {
		return nil, err
	}
	out := fromLoad(res, samples, s, interval)
	out.Name, out.Kind = p.Label(), string(p.Kind())
	out.Summary.RejectionAtServer = fr.rejectionLatency()
	if within > 0 {
		out.Summary.Within = &report.Within{BoundMs: float64(within) / float64(time.Millisecond),
			Successes: fr.okWithin.Load(), Admitted: fr.admitWithin.Load()}
	}
	return out, nil
}

// originConfig is the origin a policy of s runs against. The scenario's
// seed: the origin draws the simulator's service times.
func originConfig(s sim.Scenario) origin.Config {
	return origin.Config{Origin: s.Origin, Seed: s.Seed}
}

// loadConfig is the load generator's run of s against url: at the
// simulator's send times (the scenario's seed). The retries are runPolicy's
// to have cleared.
func loadConfig(s sim.Scenario, url string, interval time.Duration) load.Config {
	return load.Config{
		URL:      url,
		Load:     s.Load,
		Duration: s.Duration,
		Warmup:   s.Warmup,
		Seed:     s.Seed,
		Interval: interval,
		// Clients without a timeout wait for their answers as long as the
		// run lasts (seed 002's tasks were all sent at its start).
		Drain:        s.Duration,
		OffsetHeader: offsetHeader,
	}
}

// checkSockets returns what RunReal would refuse in s, before anything
// runs: the origin's and the load generator's limits, which the simulator
// does not have (200,000 origin workers simulate, but would be as many
// goroutines), and a policy that cannot be built. It names the scenario
// key at fault (a *sluice.ConfigError's field, or policies[i]) and the
// problem, with the error itself. A load that retries is not checked for
// it: runPolicy runs such a scenario without its retries, or not at all.
func checkSockets(s sim.Scenario) (field, problem string, err error) {
	if err := originConfig(s).Validate(); err != nil {
		field, problem = configProblem(err, "origin")
		return field, problem, err
	}
	lc := loadConfig(s, "http://127.0.0.1/", cmp.Or(s.Interval, time.Second))
	lc.Retries = sim.Retries{}
	if err := lc.Validate(); err != nil {
		field, problem = configProblem(err, "load")
		return field, problem, err
	}
	for i, p := range s.Policies {
		if _, ok := p.(sim.TickerPolicy); ok {
			continue // cannot fail, and would start its clock
		}
		b, err := buildPolicy(p)
		if err != nil {
			return fmt.Sprintf("policies[%d]", i), err.Error(), err
		}
		b.close()
	}
	return "", "", nil
}

// configProblem is ConfigProblem's field and problem, or, for an error
// that holds no *sluice.ConfigError, def and the error's text.
func configProblem(err error, def string) (field, problem string) {
	if field, problem, ok := ConfigProblem(err); ok {
		return field, problem
	}
	return def, err.Error()
}

// ConfigProblem is the field a *sluice.ConfigError in err names and its
// problem, in a scenario file's words ("must be at most 100000, got
// 200000"), for a scenario.File's ErrorAt; ok is false when err holds no
// *sluice.ConfigError. The lab and the CLI's load both word a config
// error from a scenario file through it.
func ConfigProblem(err error) (field, problem string, ok bool) {
	var ce *sluice.ConfigError
	if !errors.As(err, &ce) {
		return "", "", false
	}
	if ce.Value == nil {
		return ce.Field, ce.Allowed, true
	}
	return ce.Field, fmt.Sprintf("%s, got %v", ce.Allowed, ce.Value), true
}

// front is what the load generator talks to. It gives each request the
// client's deadline (the proxy in seed 003 knew its client's 2.5 s): the
// middleware then releases a request that outlived it as Dropped, the
// overload signal the simulator's limiters get when a client has gone.
// The origin's work is not cut short by it, as in the simulator: the
// origin does not know the client left. It also counts, from each
// request's arrival, successes and admissions within the report's bound
// (seed 001's "served within 1 s"), which the load generator's summary
// does not hold: of the requests whose intended send time (offsetHeader)
// is in the measured window [from, to), as the summary's counts and the
// simulator's, so that the warm-up's requests are left out.
type front struct {
	timeout, within time.Duration
	from, to        time.Duration // the measured window, from the run's start
	policy          http.Handler  // the middleware, or admitted directly
	inner           http.Handler  // the origin

	okWithin, admitWithin atomic.Int64

	mu         sync.Mutex
	rejections *hdrhistogram.Histogram // µs, the policy's rejections

	// stop ends every handler's context: the run was stopped, or is over
	// (close). handlers counts the handlers running; once closed is set
	// (under gate) no handler starts, so that Wait follows the last Add.
	stop     context.Context
	cancel   context.CancelFunc
	gate     sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

// enter counts a handler in, unless the run is over.
func (f *front) enter() bool {
	f.gate.Lock()
	defer f.gate.Unlock()
	if f.closed {
		return false
	}
	f.handlers.Add(1)
	return true
}

// close turns new requests away and cancels the handlers running; wait
// for them with handlers.Wait.
func (f *front) close() {
	f.gate.Lock()
	f.closed = true
	f.gate.Unlock()
	f.cancel()
}

// offsetHeader carries each request's intended send time from the load
// generator to the front (load.Config.OffsetHeader).
const offsetHeader = "Sluice-Lab-Offset"

type arrivalKey struct{}

// arrival is when a request came, and whether it counts (measured).
type arrival struct {
	at       time.Time
	measured bool
}

// measured reports whether r was due in the measured window. A request
// without the generator's offset is not counted: every one of the lab's
// has it.
func (f *front) measured(r *http.Request) bool {
	n, err := strconv.ParseInt(r.Header.Get(offsetHeader), 10, 64)
	return err == nil && time.Duration(n) >= f.from && time.Duration(n) < f.to
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.enter() {
		http.Error(w, "the lab's run is over", http.StatusServiceUnavailable)
		return
	}
	defer f.handlers.Done()
	now := time.Now()
	measured := f.measured(r)
	ctx := context.WithValue(r.Context(), arrivalKey{}, arrival{now, measured})
	if f.timeout > 0 {
		// Detached from the connection: a client that gives up at its
		// deadline must read as a deadline (Dropped), not as a client
		// that left for no reason (Ignore).
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), now.Add(f.timeout))
		defer cancel()
	}
	// The run's end, or its stop, ends the request whatever its client.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(f.stop, cancel)()
	sw := &statusRecorder{ResponseWriter: w}
	f.policy.ServeHTTP(sw, r.WithContext(ctx))
	took := time.Since(now)
	if measured && f.within > 0 && sw.status/100 == 2 && took <= f.within {
		f.okWithin.Add(1)
	}
	if measured && sw.rejected {
		f.mu.Lock()
		_ = f.rejections.RecordValue(max(took.Microseconds(), 1))
		f.mu.Unlock()
	}
}

// rejectionLatency is the policy's rejections' latency at the server.
func (f *front) rejectionLatency() *report.Latency {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.rejections
	l := &report.Latency{Count: h.TotalCount()}
	if l.Count > 0 {
		us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
		l.P50, l.P90, l.P99, l.P999, l.Max = us(50), us(90), us(99), us(99.9), float64(h.Max())/1000
	}
	return l
}

// admitted is the policy's next handler: it counts the admission and
// passes the request to the origin, which may take longer than the
// client's deadline (it does the work anyway).
func (f *front) admitted(w http.ResponseWriter, r *http.Request) {
	if f.within > 0 {
		if a, ok := r.Context().Value(arrivalKey{}).(arrival); ok && a.measured && time.Since(a.at) <= f.within {
			f.admitWithin.Add(1)
		}
	}
	f.inner.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
}

type statusRecorder struct {
	http.ResponseWriter
	status   int
	rejected bool // the policy said no (set by onReject)
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// onReject answers as httplimit does and names the reason in the field the
// load generator counts rejections by. A policy's rejection is marked on
// the front's recorder, which the middleware hands on as it got it, for
// the rejections' latency at the server; a wait that ended with its
// context is not one.
func onReject(w http.ResponseWriter, r *http.Request, err error) {
	var re *sluice.RejectError
	if errors.As(err, &re) {
		w.Header().Set(load.DefaultReasonHeader, re.Reason.String())
		if sr, ok := w.(*statusRecorder); ok {
			sr.rejected = true
		}
	} else {
		w.Header().Set(load.DefaultReasonHeader, "canceled")
	}
	httplimit.WriteRejection(w, r, err)
}

// Listen listens on addr (TCP); an address in use is an error that names it.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// maxWaiting bounds the middleware's waiters far above what a scenario
// holds: seed 000's ticker queues 600 rps for up to 5 s (3,000).
const maxWaiting = 1 << 20

// listen is Listen; tests replace it to see the ports the lab took.
var listen = Listen
