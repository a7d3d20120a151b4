package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrUnreachable is matched (errors.Is) by the error Run returns when it
// cannot open a connection to the target before sending anything.
var ErrUnreachable = errors.New("load: target unreachable")

// probeTimeout bounds the connection Run opens first: an unreachable
// target is an error in under a second, not a run of timeouts.
const probeTimeout = 500 * time.Millisecond

// Run sends cfg's schedule to cfg.URL and returns what it measured. It
// first checks cfg (a *sluice.ConfigError naming the field) and opens one
// connection to the target (ErrUnreachable if it cannot; ctx.Err() if ctx
// ended first, with a nil Result as nothing was sent). Then it sends
// each request at its intended time, open loop: a slow answer never delays
// the next send. When ctx ends, whether during the schedule or during the
// final wait for outstanding answers, Run stops sending, cancels what is
// outstanding and returns the partial Result (Interrupted) with ctx.Err().
func Run(ctx context.Context, cfg Config) (*Result, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(c.URL)
	cl := newClients(&c)
	defer cl.close()
	if err := cl.probe(ctx, u); err != nil {
		return nil, err
	}

	rec := newRecorder(&c)
	r := &runner{cfg: &c, rec: rec, clients: cl, jobs: make(chan job, c.ClientWorkers)}
	// At most one worker per connection: min(ClientWorkers,
	// Connections×clients), the product formed only when it is the
	// smaller (at validate's bounds it passes a 32-bit int).
	r.maxWorkers = c.ClientWorkers
	if c.Connections > 0 && c.Connections <= r.maxWorkers/len(cl.http) {
		r.maxWorkers = c.Connections * len(cl.http)
	}
	// reqCtx outlives ctx by nothing, and ends outstanding requests when
	// the run is over.
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	stopProgress := r.progress(start)
	stopped, interrupted := r.send(ctx, reqCtx, newSchedule(c.Load, c.Seed), start)
	r.drain(ctx, cancel)
	stopProgress()
	// The schedule may be over when ctx ends, during the final wait: the
	// requests drain then cancels were cut short all the same (counted
	// Unfinished), and the run is as interrupted as one stopped mid-send.
	interrupted = interrupted || ctx.Err() != nil

	// A run stopped mid-schedule has rates over the part it ran: over
	// the whole Duration, a run of 100/s stopped after a second showed
	// 100 requests over the minute it was to last.
	res := rec.result(stopped)
	res.URL, res.Start = c.URL, start
	if interrupted {
		res.Interrupted = true
		if stopped < c.Duration {
			res.Stopped = stopped
		}
		return res, ctx.Err()
	}
	return res, nil
}

type runner struct {
	cfg         *Config
	rec         *recorder
	clients     *clients
	jobs        chan job // sent, waiting for a worker; holds ClientWorkers; closed after the last
	wg          sync.WaitGroup
	outstanding atomic.Int64 // in jobs or in a worker's hands
	maxWorkers  int
	workers     int          // started; only send touches it
	spare       atomic.Int64 // workers idle less jobs waiting; see send
}

// send runs the schedule; it reports whether ctx ended it, and where: the
// intended send time of the first request it did not plan (Duration when
// it ran to the end).
func (r *runner) send(ctx, reqCtx context.Context, s *schedule, start time.Time) (stopped time.Duration, interrupted bool) {
	c := r.cfg
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := 0; ; k++ {
		off, ok := s.Next()
		if !ok || off >= c.Duration {
			return c.Duration, false
		}
		due := start.Add(off)
		if wait := time.Until(due); wait > 0 {
			// Sends that are due together (a burst, or a backlog after a
			// late wake-up) go out without a sleep between them.
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return off, true
			}
		} else if k&255 == 0 && ctx.Err() != nil {
			return off, true
		}
		lag := time.Since(due)
		if r.outstanding.Load() >= int64(c.ClientWorkers) || (c.Timeout > 0 && lag >= c.Timeout) {
			r.rec.skipped(off)
			continue
		}
		r.rec.sent(off, lag)
		r.outstanding.Add(1)
		r.jobs <- job{k: k, due: due, off: off} // never blocks: outstanding < its capacity
		// The job takes an idle worker, or a new one. spare is the idle
		// workers less the jobs waiting for one: a worker adds itself as
		// it goes idle, each job takes one away. (Starting one when none
		// was idle, or when the channel held more jobs than workers were
		// idle, started too few: a job handed straight to a parked worker
		// is in neither count until that worker runs, so a burst of 200
		// went out through the 50 workers a previous burst had left idle,
		// each request as another was answered.)
		if r.spare.Add(-1) < 0 && r.workers < r.maxWorkers {
			r.spare.Add(1) // the new worker is this job's
			r.workers++
			r.wg.Add(1)
			go r.worker(reqCtx, start)
		}
	}
}

// job is one request to send.
type job struct {
	k   int
	due time.Time
	off time.Duration
}

// worker sends the jobs in turn until the run ends. There are at most as
// many workers as connections (Connections per client), and sent requests
// beyond them wait in jobs, a FIFO, their latency still counted from the
// intended time; the connections are what the workers share. A goroutine
// per request instead paid for its creation and for growing its stack
// through net/http each time, and once a stall made requests pile up, the
// thousands of goroutines waiting in net/http for a connection cost so
// much that the generator fell further behind and never caught up.
func (r *runner) worker(ctx context.Context, start time.Time) {
	defer r.wg.Done()
	for first := true; ; first = false {
		if !first {
			r.spare.Add(1) // idle again (the first job was counted by send)
		}
		j, ok := <-r.jobs
		if !ok {
			return // the schedule is over and every job taken
		}
		r.do(ctx, j.k, j.due, j.off, start)
		r.outstanding.Add(-1)
	}
}

// drain waits for the outstanding requests: until their Timeout, or for
// Drain when there is none; then it cancels what is left and waits for the
// workers to end.
func (r *runner) drain(ctx context.Context, cancel context.CancelFunc) {
	close(r.jobs) // send is over: the workers end once the jobs are done
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	limit := r.cfg.Drain
	if t := r.cfg.Timeout; t > 0 {
		// Their own deadlines end them. Saturated: a Timeout within a
		// second of the longest Duration wrapped to a negative limit, and
		// cut every outstanding request short at once.
		limit = t + min(time.Second, math.MaxInt64-t)
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	cancel()
	<-done
}

// do sends request k, due at due, and records how it ended.
func (r *runner) do(ctx context.Context, k int, due time.Time, off time.Duration, start time.Time) {
	c := r.cfg
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, due.Add(c.Timeout), errTimeout)
		defer cancel()
	}
	client, tmpl := r.clients.pick(k)
	// A shallow copy of a request built once: net/http does not change a
	// request it sends, and parsing the URL for each one was a tenth of the
	// generator's allocations.
	req := tmpl.WithContext(ctx)
	if c.OffsetHeader != "" {
		req.Header = req.Header.Clone()
		req.Header.Set(c.OffsetHeader, strconv.FormatInt(int64(off), 10))
	}
	var o outcome
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.code = resp.StatusCode
		if o.code < 200 || o.code >= 300 {
			o.reason = resp.Header.Get(c.ReasonHeader)
		}
		if err != nil { // the status came, the body did not: a failure
			// The reason goes too: a reason alone counts as a rejection,
			// and this answer never arrived whole.
			o.code, o.reason = 0, ""
		}
	}
	end := time.Now()
	o.lat, o.end = end.Sub(due), end.Sub(start)
	if o.code == 0 {
		o.err = errorKind(ctx, err)
	}
	r.rec.done(off, o)
}

// errTimeout is the cause of a request's context ending at its own
// deadline, Timeout after its intended time. Its ctx.Err() alone cannot
// tell: a deadline of the run's context (the caller's) also ends it with
// DeadlineExceeded, and those requests were cut short by the end of the
// run, not timed out by the client.
var errTimeout = errors.New("load: client timeout")

// errorKind names a transport error for Result.Errors.
func errorKind(ctx context.Context, err error) string {
	switch {
	case errors.Is(context.Cause(ctx), errTimeout):
		return "timeout"
	case ctx.Err() != nil:
		return unfinished
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	return "other"
}

// clients are the HTTP clients the load is spread over: one per source
// address (ViaAddr), or one shared by every X-Forwarded-For name.
type clients struct {
	http []*http.Client
	addr []net.IP        // source addresses, ViaAddr with more than one client
	reqs []*http.Request // templates: one per X-Forwarded-For name, or one
}

// clientIP is client i's address in 127.0.0.0/8 (base 127) or 10.0.0.0/8
// (base 10): base.0.(i/250).(1+i%250), avoiding .0 and .255.
func clientIP(base byte, i int) net.IP {
	return net.IPv4(base, 0, byte(i/250), byte(1+i%250))
}

func newClients(c *Config) *clients {
	cl := &clients{}
	n := 1
	if c.Clients > 1 && c.ClientsVia == ViaAddr {
		n = c.Clients
		for i := range n {
			cl.addr = append(cl.addr, clientIP(127, i))
		}
	}
	var xff []string
	if c.Clients > 1 && c.ClientsVia == ViaXFF {
		for i := range c.Clients {
			xff = append(xff, clientIP(10, i).String())
		}
	} else {
		xff = []string{""}
	}
	for _, name := range xff {
		req, err := http.NewRequest(c.Method, c.URL, nil)
		if err != nil { // validate checked the method and the URL
			panic(err)
		}
		for k, vs := range c.Header {
			// net/http sends req.Host and ignores a Host field in
			// req.Header (a "host" one not in canonical form goes out as
			// a second Host line): a virtual host asked for with -H must
			// be moved. validate allows one value.
			if http.CanonicalHeaderKey(k) == "Host" {
				if len(vs) > 0 {
					req.Host = vs[0]
				}
				continue
			}
			req.Header[k] = vs
		}
		if name != "" {
			req.Header.Set("X-Forwarded-For", name)
		}
		cl.reqs = append(cl.reqs, req)
	}
	idle := c.ClientWorkers/n + 1
	conns := 0 // no cap
	if c.Connections > 0 {
		conns = c.Connections
		idle = min(idle, conns)
	}
	for i := range n {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		if cl.addr != nil {
			d.LocalAddr = &net.TCPAddr{IP: cl.addr[i]}
		}
		cl.http = append(cl.http, &http.Client{
			Transport: &http.Transport{
				DialContext:         d.DialContext,
				MaxIdleConns:        0, // no total cap: MaxIdleConnsPerHost bounds each
				MaxIdleConnsPerHost: idle,
				MaxConnsPerHost:     conns,
				IdleConnTimeout:     90 * time.Second,
				DisableCompression:  true,
				DisableKeepAlives:   c.DisableKeepAlive,
			},
			// A redirect is an answer to count, not to follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		})
	}
	return cl
}

// pick returns the client and the request template of the k-th request.
func (cl *clients) pick(k int) (*http.Client, *http.Request) {
	return cl.http[k%len(cl.http)], cl.reqs[k%len(cl.reqs)]
}

// probe opens and closes one connection to u's host, as the first client.
func (cl *clients) probe(ctx context.Context, u *url.URL) error {
	d := net.Dialer{Timeout: probeTimeout}
	if cl.addr != nil {
		d.LocalAddr = &net.TCPAddr{IP: cl.addr[0]}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		if err := ctx.Err(); err != nil {
			return err // the caller's stop, not the target's doing
		}
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, u.Host, err)
	}
	return conn.Close()
}

func (cl *clients) close() {
	for _, c := range cl.http {
		c.CloseIdleConnections()
	}
}

// progress prints a progress line every second to cfg.Progress until the
// returned function is called.
func (r *runner) progress(start time.Time) (stop func()) {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case now := <-t.C:
				sent, good, rej, fail := r.rec.progress()
				el := now.Sub(start)
				fmt.Fprintf(w, "\r%5.0fs / %v  sent %d  good %d (%.0f/s)  rejected %d  failed %d  outstanding %d   ",
					el.Seconds(), r.cfg.Duration, sent, good, float64(good)/el.Seconds(), rej, fail, r.outstanding.Load())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
