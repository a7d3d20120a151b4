// Command client sends a batch of requests the way sluice's client side
// recommends: a bounded executor keeps N in flight (no thundering herd, no
// batches), and client.Transport throttles locally when the server keeps
// refusing (the SRE book's adaptive throttling) and retries 429 and 503
// within a retry budget, never sooner than the server's Retry-After.
//
//	go run ./examples/client -url http://localhost:8080/ -n 1000   # against examples/server
//	go run ./examples/client -demo                                # against a rate-limited server on loopback
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "client:", err)
		}
		os.Exit(2)
	}
}

type options struct {
	url         string
	n           int
	concurrency int
	rps         float64
	timeout     time.Duration
	demo        bool
	serverRate  float64
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.url, "url", "", "URL to send GET requests to (required without -demo)")
	fs.IntVar(&o.n, "n", 300, "requests to send")
	fs.IntVar(&o.concurrency, "concurrency", 16, "requests in flight at most")
	fs.Float64Var(&o.rps, "rps", 200, "requests started per second at most; 0: as fast as -concurrency allows")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of each request, its retries included")
	fs.BoolVar(&o.demo, "demo", false, "start a rate-limited server on loopback, send to it, print a summary and exit")
	fs.Float64Var(&o.serverRate, "server-rate", 50, "requests per second the demo server admits")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.n < 1:
		return o, fmt.Errorf("-n must be at least 1, got %d", o.n)
	case o.concurrency < 1:
		return o, fmt.Errorf("-concurrency must be at least 1, got %d", o.concurrency)
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout must be positive, got %v", o.timeout)
	case !(o.rps >= 0):
		return o, fmt.Errorf("-rps must not be negative, got %v", o.rps)
	case !(o.serverRate > 0):
		return o, fmt.Errorf("-server-rate must be positive, got %v", o.serverRate)
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.demo && o.url != "":
		return o, errors.New("-url and -demo exclude each other")
	case !o.demo && o.url == "":
		return o, errors.New("-url is required (or use -demo)")
	}
	if o.url != "" {
		if u, err := url.Parse(o.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("-url %q is not an http(s) URL", o.url)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	if o.demo {
		srv, stop, err := demoServer(o.serverRate)
		if err != nil {
			return err
		}
		defer stop()
		o.url = srv
		fmt.Fprintf(out, "demo server on %s admits %v req/s (burst 10), answers 429 with Retry-After beyond\n", srv, o.serverRate)
	}
	return send(ctx, o, out)
}

// tally counts how the requests ended.
type tally struct {
	ok, refused, throttled, failed atomic.Int64
}

func send(ctx context.Context, o options, out io.Writer) error {
	throttler, err := client.NewThrottler(client.ThrottlerConfig{K: 2})
	if err != nil {
		return err
	}
	base := &http.Transport{MaxIdleConnsPerHost: o.concurrency}
	defer base.CloseIdleConnections()
	tr, err := client.NewTransport(client.TransportConfig{
		Base:    base,
		Limiter: throttler,
		Retry:   client.RetryPolicy{MaxAttempts: 3, MaxDelay: o.timeout},
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr}
	exec, err := client.NewExecutor(o.concurrency)
	if err != nil {
		return err
	}

	var t tally
	var pace <-chan time.Time
	if o.rps > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / o.rps))
		defer tick.Stop()
		pace = tick.C
	}
	start := time.Now()
	for i := range o.n {
		if pace != nil && i > 0 {
			select {
			case <-pace:
			case <-ctx.Done():
			}
		}
		err := exec.Go(ctx, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			t.count(get(ctx, hc, o.url))
			return nil
		})
		if err != nil {
			break // ctx ended: stop submitting
		}
	}
	exec.Wait()
	elapsed := time.Since(start)

	ts := tr.Stats()
	fmt.Fprintf(out, "sent %d requests (%v/s, %d in flight at most) in %v\n", o.n, o.rps, o.concurrency, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "ok=%d refused=%d throttled=%d failed=%d\n", t.ok.Load(), t.refused.Load(), t.throttled.Load(), t.failed.Load())
	fmt.Fprintf(out, "transport: retries=%d budget_denied=%d rejected_locally=%d; throttler now rejects with p=%.2f\n",
		ts.Retries, ts.BudgetDenied, ts.Rejected, throttler.RejectProbabilityAt(time.Now()))
	return ctx.Err()
}

// get sends one request and classifies how it ended.
func get(ctx context.Context, hc *http.Client, url string) (status int, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func (t *tally) count(status int, err error) {
	switch {
	case errors.Is(err, sluice.ErrRejected):
		t.throttled.Add(1) // refused locally: the server never saw it
	case err != nil:
		t.failed.Add(1)
	case status == http.StatusOK:
		t.ok.Add(1)
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		t.refused.Add(1) // still refused after the retries the policy allowed
	default:
		t.failed.Add(1)
	}
}

// demoServer starts a server on loopback that admits rate requests per
// second through httplimit and returns its URL and a func that stops it.
func demoServer(r float64) (string, func(), error) {
	b, err := rate.NewBucket(rate.Config{Rate: r, Burst: 10})
	if err != nil {
		return "", nil, err
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	h, err := httplimit.New(ok, httplimit.Config{Limiter: b, NoWait: true})
	if err != nil {
		return "", nil, err
	}
	ln, err := listenLoopback()
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}
	return "http://" + ln.Addr().String() + "/", stop, nil
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
