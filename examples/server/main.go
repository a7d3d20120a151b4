// Command server is a net/http server protected by sluice: a token bucket
// per client IP (429 when a client is over its share) and a global adaptive
// concurrency limit (503 when the server is at capacity), in front of a
// backend with a fixed number of workers.
//
//	go run ./examples/server                  # serve on 127.0.0.1:8080 until interrupted
//	go run ./examples/server -demo            # serve on loopback, load it for 6 s, print a summary, exit
//
// In demo mode one greedy client sends ten times its share while a crowd of
// polite clients, each within its share, together ask for more than the
// backend can do: the greedy one gets 429s, the crowd gets 503s once the
// adaptive limit finds the backend's capacity, and the requests admitted
// stay fast: the summary's last lines give the limit the demo ended with
// (the backend's 4 workers, or one more) and the time admitted requests
// spent in the backend, near its 20 ms of work once the limit has
// settled (the run's second half). The demo's load generator plays a
// trusted proxy on 127.0.0.1 and names its clients in X-Forwarded-For.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "server:", err)
		}
		os.Exit(2)
	}
}

type options struct {
	addr     string
	rate     float64
	burst    int
	workers  int
	work     time.Duration
	trusted  string
	demo     bool
	duration time.Duration
	crowd    int
}

// maxRate bounds -rate. Past it a typo: the demo's greedy client sends ten
// times the rate, one request every 100 ns at the bound, and a rate far
// above made that interval 0, which panicked.
const maxRate = 1e6

// maxCrowd bounds -crowd. Each crowd client is a goroutine, and a crowd of
// a hundred million made a short demo run far past its -duration on its
// way to exhausting memory; and each is named by its own address in
// 198.51.101.0/24 (see demo), so past 255 the names are not addresses and
// the server keys those clients by the load generator's own: they share
// one bucket and the polite crowd gets 429s.
const maxCrowd = 255

// maxDemoRate bounds what -demo sends a second, its groups' rates summed
// (see demoGroups). Past it the load generator, the server and the demo's
// clients share the machine's cores and fall behind: the demo runs well
// past its -duration, takes far more memory, and most requests fail, which
// shows nothing about the limits. At the bound the demo sends near what
// one machine can, and its requests are served.
const maxDemoRate = 20000

// demoRate is what -demo sends a second: the sum of demoGroups' rates.
func (o options) demoRate() float64 {
	total := 0.0
	for _, g := range o.demoGroups() {
		total += float64(g.clients) * g.rps
	}
	return total
}

// parse reads the flags. Every value it accepts is one the server and the
// demo can run: besides maxRate and maxCrowd, -burst over -rate (the time a
// client's bucket takes to refill, which sets the advertised window and, in
// the demo, the crowd's interval) is bounded by rate.MaxFill, so neither
// overflows a time.Duration.
func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on; loopback by default, give :8080 to serve other hosts (ignored with -demo)")
	fs.Float64Var(&o.rate, "rate", 20, "requests per second each client IP may send, at most 1e6")
	fs.IntVar(&o.burst, "burst", 20, "requests a client IP may send at once after a pause")
	fs.IntVar(&o.workers, "workers", 4, "requests the backend works on at once")
	fs.DurationVar(&o.work, "work", 20*time.Millisecond, "time the backend spends on a request")
	fs.StringVar(&o.trusted, "trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For is trusted")
	fs.BoolVar(&o.demo, "demo", false, "serve on loopback, drive the server with demo clients, print a summary and exit")
	fs.DurationVar(&o.duration, "duration", 6*time.Second, "how long the demo load runs (the adaptive limit needs a few seconds to settle)")
	fs.IntVar(&o.crowd, "crowd", 30, "polite clients in the demo, each at half its share, at most 255")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case !(o.rate > 0 && o.rate <= maxRate): // NaN too
		return o, fmt.Errorf("-rate must be in (0, %g], got %v", maxRate, o.rate)
	case o.burst < 1:
		return o, fmt.Errorf("-burst must be at least 1, got %d", o.burst)
	case float64(o.burst)/o.rate > rate.MaxFill.Seconds():
		const year = 365.25 * 24 * 3600
		return o, fmt.Errorf("-burst %d at -rate %v takes %.3g years to refill, more than a bucket counts (%.3g years): raise -rate or lower -burst",
			o.burst, o.rate, float64(o.burst)/o.rate/year, rate.MaxFill.Seconds()/year)
	case o.workers < 1:
		return o, fmt.Errorf("-workers must be at least 1, got %d", o.workers)
	case o.work <= 0:
		return o, fmt.Errorf("-work must be positive, got %v", o.work)
	case o.duration <= 0:
		return o, fmt.Errorf("-duration must be positive, got %v", o.duration)
	case o.crowd < 0 || o.crowd > maxCrowd:
		return o, fmt.Errorf("-crowd must be in [0, %d], got %d", maxCrowd, o.crowd)
	case o.demo && o.demoRate() > maxDemoRate:
		return o, fmt.Errorf("-demo would send %.6g requests a second (10 × -rate %v, and -crowd %d at -rate/2 each), more than %d: lower -rate or -crowd",
			o.demoRate(), o.rate, o.crowd, maxDemoRate)
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	var trusted []string
	if o.trusted != "" {
		trusted = strings.Split(o.trusted, ",")
	}
	if o.demo {
		trusted = append(trusted, "127.0.0.1") // the demo's load generator
	}
	s, err := newServer(o, trusted)
	if err != nil {
		return err
	}
	if o.demo {
		return demo(ctx, o, s, out)
	}
	srv := &http.Server{Addr: o.addr, Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(out, "serving on %s: %v req/s (burst %d) per client IP, adaptive concurrency limit over %d workers\n",
		o.addr, o.rate, o.burst, o.workers)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// server is the protected handler and the limiters it reports on.
type server struct {
	handler *httplimit.Handler
	global  *concurrency.Limiter
	alg     *adaptive.Little
	backend *backend
}

func newServer(o options, trusted []string) (*server, error) {
	perIP, err := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) {
			// A short wait smooths a client's small bursts; past it the
			// client is told to come back (429) instead of piling up.
			return rate.NewBucket(rate.Config{Rate: o.rate, Burst: o.burst, MaxWait: 10 * time.Millisecond})
		},
		MaxKeys:     100_000,
		IdleTimeout: time.Minute,
	})
	if err != nil {
		return nil, err
	}
	// Little, the recommended adaptive limit, finds the backend's worker
	// count (which the server is not told) from latency and throughput,
	// plus 15% (its Headroom) for a small queue. A short LIFO queue in
	// front keeps a request ready for each worker that frees and serves
	// the freshest; once the queue stands, a waiter left four mean service
	// times is told no (MaxWaitServices: the bound follows the backend's
	// speed, which the server is not told either; until the queue stands a
	// waiter may stay until four times that after it was last empty).
	alg, err := adaptive.NewLittle(adaptive.LittleConfig{MaxLimit: 200})
	if err != nil {
		return nil, err
	}
	global, err := concurrency.New(concurrency.Config{
		Algorithm:       alg,
		MaxQueue:        50,
		MaxWaitServices: 4,
		Discipline:      concurrency.LIFO,
	})
	if err != nil {
		return nil, err
	}
	window := time.Duration(math.Ceil(float64(o.burst)/o.rate)) * time.Second
	b := newBackend(o.workers, o.work, o.demo)
	h, err := httplimit.New(b, httplimit.Config{
		PerKey:   perIP,
		Limiter:  global,
		ClientIP: httplimit.IPConfig{TrustedProxies: trusted, IPv6Prefix: 64},
		Policy: &httplimit.RatePolicy{Name: "per-ip", Quota: o.burst, Window: max(window, time.Second),
			Remaining: httplimit.BucketRemaining(perIP.Get)},
	})
	if err != nil {
		return nil, err
	}
	return &server{handler: h, global: global, alg: alg, backend: b}, nil
}

// backend stands for the work being protected: a fixed number of workers,
// each request taking a fixed time; extra requests queue for a worker, so
// latency grows with load past capacity, as a real service's does.
type backend struct {
	workers chan struct{}
	work    time.Duration

	// In the demo, how long each admitted request spent in the backend
	// (waiting for a worker, then working): what the adaptive limit keeps
	// near the work time. Not kept when serving, where it would grow
	// without bound.
	record bool
	mu     sync.Mutex
	took   []time.Duration
}

func newBackend(workers int, work time.Duration, record bool) *backend {
	return &backend{workers: make(chan struct{}, workers), work: work, record: record}
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.record {
		start := time.Now()
		defer func() {
			b.mu.Lock()
			b.took = append(b.took, time.Since(start))
			b.mu.Unlock()
		}()
	}
	ctx := r.Context()
	select {
	case b.workers <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-b.workers }()
	t := time.NewTimer(b.work)
	defer t.Stop()
	select {
	case <-t.C:
		io.WriteString(w, "done\n")
	case <-ctx.Done():
	}
}

// listenLoopback listens on an ephemeral loopback port.
func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
