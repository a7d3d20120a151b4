package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/origin"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
	"github.com/sluicehq/sluice/sim"
)

func runOrigin(e env, fs *flag.FlagSet, args []string) int {
	addr := fs.String("addr", "127.0.0.1:8080", "listen on `ADDR` (host:port; port 0 picks a free one)")
	workers := fs.Int("workers", 0, "requests served at once (origin.workers)")
	work := fs.Duration("work", 0, "mean service time (origin.service.mean)")
	dist := fs.String("dist", "", "service-time distribution: constant, exponential, lognormal, bimodal (origin.service.kind; default constant)")
	sigma := fs.Float64("sigma", 0, "lognormal shape (origin.service.sigma)")
	tail := fs.Duration("tail", 0, "bimodal slow mode (origin.service.tail)")
	tailFrac := fs.Float64("tail-fraction", 0, "bimodal probability of the slow mode (origin.service.tail_fraction)")
	queue := fs.Int("queue", 0, "most requests waiting for a worker; -1 unbounded (origin.queue)")
	timeout := fs.Duration("timeout", 0, "answer 504 after this long (origin.timeout; 0: never)")
	timescale := fs.Float64("timescale", 1, "multiply every duration of the model by `F` (0.05: 1s becomes 50ms)")
	errRate := fs.Float64("error-rate", 0, "fraction of served requests answered 500")
	seed := fs.Uint64("seed", 0, "seed of the service-time draws (default: the scenario's, whose draws are then the simulator's; else random)")
	runFor := fs.Duration("for", 0, "stop after this long (0: until interrupted)")
	var changes changesFlag
	fs.Var(&changes, "change", "change the model at a time: `AT:work=D` (the mean service time) and/or workers=N, comma-separated (60s:work=2s); repeatable (origin.changes)")
	pos, code, ok := parse(fs, args, -1)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		return usageError(fs, "arguments", fmt.Errorf("want at most one scenario file, got %d", len(pos)))
	}

	var cfg origin.Config
	var sf *scenario.File
	if len(pos) == 1 {
		f, err := loadScenario(pos[0])
		if err != nil {
			return badScenario(e, "origin", err)
		}
		sf = f
		cfg.Origin = f.Origin
		cfg.Seed = f.Seed
	} else {
		cfg.Service.Kind = sim.Constant
	}
	// Flags set on the command line override the file.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["workers"] {
		cfg.Workers = *workers
	}
	if set["work"] {
		cfg.Service.Mean = *work
	}
	if set["dist"] {
		cfg.Service.Kind = sim.DistKind(*dist)
	}
	if set["sigma"] {
		cfg.Service.Sigma = *sigma
	}
	if set["tail"] {
		cfg.Service.Tail = *tail
	}
	if set["tail-fraction"] {
		cfg.Service.TailFraction = *tailFrac
	}
	if set["queue"] {
		cfg.Queue = *queue
	}
	if set["timeout"] {
		cfg.Timeout = *timeout
	}
	switch {
	case set["seed"]:
		cfg.Seed = *seed
	case len(pos) == 0:
		cfg.Seed = rand.Uint64()
	}
	if len(changes) > 0 {
		cfg.Changes = nil
		for _, ch := range changes {
			c := sim.Change{At: ch.at, Workers: ch.workers}
			if ch.work > 0 {
				c.Service = cfg.Service // same distribution, new mean
				c.Service.Mean = ch.work
			}
			cfg.Changes = append(cfg.Changes, c)
		}
	}
	cfg.TimeScale, cfg.ErrorRate = *timescale, *errRate
	if !(*timescale > 0) { // the library reads 0 as its default
		return usageError(fs, "-timescale", fmt.Errorf("must be > 0, got %v", *timescale))
	}
	if *runFor < 0 {
		return usageError(fs, "-for", fmt.Errorf("must be >= 0, got %v", *runFor))
	}

	srv, err := origin.New(cfg)
	if err != nil {
		if ferr := inFile(sf, set, err, originFileFields); ferr != nil {
			return badScenario(e, "origin", ferr)
		}
		return configError(fs, err)
	}
	defer srv.Close()
	ln, err := listen(*addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice origin: %v\n", err)
		return ExitFail
	}
	hs := originHTTPServer(srv.Handler())
	fmt.Fprintf(e.stdout, "sluice origin: serving on http://%s/ (%d workers, queue %s, %s service, capacity %.1f/s), metrics on /metrics\n",
		ln.Addr(), cfg.Workers, queueString(cfg.Queue), cfg.Service.Kind, srv.Capacity())

	ctx, stop := signalContext()
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(e.stderr, "sluice origin: %v\n", err)
		return ExitFail
	case <-ctx.Done():
	}
	srv.Close() // answers what is waiting, so that Shutdown does not wait for it
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-errc
	st := srv.Stats()
	fmt.Fprintf(e.stdout, "sluice origin: served %d, errors %d, refused %d, timed out %d, most in flight %d\n",
		st.Served, st.Errors, st.Refused, st.TimedOut, st.MaxInFlight)
	return ExitOK
}

// The origin's connection timeouts. A client that sends no complete
// request header, or keeps a connection idle, must not hold a socket and a
// goroutine for ever. There is no ReadTimeout or WriteTimeout: the model
// holds a request as long as its queue and service times say (up to hours),
// and its own Timeout answers 504 when one is set.
const (
	originReadHeaderTimeout = 10 * time.Second
	originIdleTimeout       = 2 * time.Minute // longer than a load's gaps between requests
)

// originHTTPServer is the http.Server that serves h for sluice origin.
func originHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: originReadHeaderTimeout, IdleTimeout: originIdleTimeout}
}

func queueString(q int) string {
	if q == sim.Unbounded {
		return "unbounded"
	}
	return fmt.Sprint(q)
}

// listen opens a TCP listener; a port in use is reported with the port.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		_, port, _ := net.SplitHostPort(addr)
		return nil, fmt.Errorf("port %s is in use (listen %s): pick another with -addr", port, addr)
	}
	return ln, err
}

// originFileFields are the origin settings a scenario file gives, with
// the flag that overrides each (see inFile); a change's fields go by
// origin.changes.
var originFileFields = map[string][]string{
	"origin.workers": {"workers"}, "origin.queue": {"queue"}, "origin.timeout": {"timeout"},
	"origin.service.kind": {"dist"}, "origin.service.mean": {"work"}, "origin.service.sigma": {"sigma"},
	"origin.service.tail": {"tail"}, "origin.service.tail_fraction": {"tail-fraction"},
	"origin.changes": {"change"},
}

// configError reports a bad configuration (a *sluice.ConfigError names the
// field) and returns ExitUsage.
func configError(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	return ExitUsage
}

// changesFlag collects -change AT:work=D,workers=N.
type changesFlag []struct {
	at, work time.Duration
	workers  int
}

func (c *changesFlag) String() string { return "" }
func (c *changesFlag) Set(v string) error {
	at, rest, ok := strings.Cut(v, ":")
	if !ok || rest == "" {
		return fmt.Errorf("want AT:work=D or AT:workers=N (60s:work=2s), got %q", v)
	}
	d, err := time.ParseDuration(at)
	if err != nil {
		return fmt.Errorf("time %q: %v", at, err)
	}
	ch := struct {
		at, work time.Duration
		workers  int
	}{at: d}
	for _, kv := range strings.Split(rest, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "work":
			if ch.work, err = time.ParseDuration(val); err != nil || ch.work <= 0 {
				return fmt.Errorf("work %q: want a duration > 0", val)
			}
		case "workers":
			if ch.workers, err = strconv.Atoi(val); err != nil || ch.workers <= 0 {
				return fmt.Errorf("workers %q: want a number > 0", val)
			}
		default:
			return fmt.Errorf("unknown change %q (work=D, workers=N)", kv)
		}
	}
	*c = append(*c, ch)
	return nil
}
