package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// group is a set of demo clients sending at the same rate.
type group struct {
	name    string
	clients int
	rps     float64 // per client

	mu        sync.Mutex
	sent      int
	byStatus  map[int]int
	errs      int
	okLatency []time.Duration
}

func (g *group) record(status int, err error, latency time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil:
		g.errs++
	default:
		g.byStatus[status]++
		if status == http.StatusOK {
			g.okLatency = append(g.okLatency, latency)
		}
	}
}

// demoGroups returns the demo's clients: one greedy client at ten times its
// share, and a crowd of o.crowd polite ones at half their share each.
// parse bounds their total rate (demoRate) by maxDemoRate.
func (o options) demoGroups() []*group {
	return []*group{
		{name: "greedy", clients: 1, rps: 10 * o.rate},
		{name: "crowd", clients: o.crowd, rps: o.rate / 2},
	}
}

// demo serves s on loopback, sends open-loop load from a greedy client and a
// crowd for o.duration, and prints what each group got and what the server
// counted.
func demo(ctx context.Context, o options, s *server, out io.Writer) error {
	ln, err := listenLoopback()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	groups := o.demoGroups()
	fmt.Fprintf(out, "demo: %v per client IP (burst %d); backend %d workers x %v = %.0f req/s\n",
		o.rate, o.burst, o.workers, o.work, float64(o.workers)/o.work.Seconds())
	for _, g := range groups {
		fmt.Fprintf(out, "  %-6s %3d client(s) at %5.1f req/s each\n", g.name, g.clients, g.rps)
	}

	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	loadCtx, cancel := context.WithTimeout(ctx, o.duration)
	var wg sync.WaitGroup
	url := "http://" + ln.Addr().String() + "/"
	for gi, g := range groups {
		g.byStatus = map[int]int{}
		for c := range g.clients {
			ip := demoIP(gi, c)
			wg.Go(func() { drive(loadCtx, client, url, ip, g, &wg) })
		}
	}
	wg.Wait()
	cancel()
	tr.CloseIdleConnections()
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	report(out, groups, s)
	return nil
}

// demoIP names client c of group gi, in X-Forwarded-For: an address of
// its own while c < maxCrowd.
func demoIP(gi, c int) string { return fmt.Sprintf("198.51.%d.%d", 100+gi, c+1) }

// drive sends requests as ip at g.rps on a fixed schedule, whether or not
// the previous ones have finished (open loop, as real clients do). Each
// client starts at a random point of its period: clients started together
// would all send at the same instants, and their bursts would queue
// whatever the server did.
func drive(ctx context.Context, client *http.Client, url, ip string, g *group, wg *sync.WaitGroup) {
	every := period(g.rps)
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(every)):
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		g.mu.Lock()
		g.sent++
		g.mu.Unlock()
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), "GET", url, nil)
			req.Header.Set("X-Forwarded-For", ip)
			start := time.Now()
			resp, err := client.Do(req)
			status := 0
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			g.record(status, err, time.Since(start))
		})
	}
}

// period is the time between a demo client's requests at rps. parse's
// bounds keep it in (0, 2×rate.MaxFill]: rand.N and NewTicker panic on 0.
func period(rps float64) time.Duration { return time.Duration(float64(time.Second) / rps) }

func report(out io.Writer, groups []*group, s *server) {
	fmt.Fprintln(out, "results:")
	for _, g := range groups {
		slices.Sort(g.okLatency)
		fmt.Fprintf(out, "  %-6s sent=%d ok=%d 429=%d 503=%d other=%d errors=%d ok_p50=%v ok_p99=%v\n",
			g.name, g.sent, g.byStatus[200], g.byStatus[429], g.byStatus[503],
			g.sent-g.byStatus[200]-g.byStatus[429]-g.byStatus[503]-g.errs, g.errs,
			quantile(g.okLatency, 0.50), quantile(g.okLatency, 0.99))
	}
	st := s.handler.Stats()
	fmt.Fprintf(out, "middleware: requests=%d admitted=%d rejected=%d (per-ip %d); by reason:",
		st.Requests, st.Admitted, st.RejectedTotal(), st.RejectedPerKey)
	for r, n := range st.Rejected {
		if n > 0 {
			fmt.Fprintf(out, " %v=%d", sluice.Reason(r), n)
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "outcomes: success=%d dropped=%d ignored=%d; adaptive concurrency limit now %.0f, no-load latency %v\n",
		st.Succeeded, st.Dropped, st.Ignored, s.global.Stats().Limit, s.alg.NoLoadLatency().Round(time.Millisecond/10))
	// The first half of the run includes the limit's learning from its
	// initial 20, which lets a queue form at the backend: the second
	// half shows where it settled.
	b := s.backend
	b.mu.Lock()
	defer b.mu.Unlock()
	late := slices.Sorted(slices.Values(b.took[len(b.took)/2:]))
	slices.Sort(b.took)
	fmt.Fprintf(out, "backend: %d workers x %v of work; time admitted requests spent in it (waiting for a worker, then working):\n",
		cap(b.workers), b.work)
	fmt.Fprintf(out, "  whole run p50=%v p99=%v; second half p50=%v p99=%v\n",
		quantile(b.took, 0.50), quantile(b.took, 0.99), quantile(late, 0.50), quantile(late, 0.99))
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)].Round(time.Millisecond / 10)
}
