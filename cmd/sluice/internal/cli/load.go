package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/lab"
	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/cmd/sluice/internal/outfile"
	"github.com/sluicehq/sluice/cmd/sluice/internal/scenario"
	"github.com/sluicehq/sluice/sim"
)

func runLoad(e env, fs *flag.FlagSet, args []string) int {
	file := fs.String("scenario", "", "take the schedule from the load: section (and duration, warmup, seed) of `FILE`")
	rate := fs.Float64("rate", 0, "requests per second (load.rate)")
	rampTo := fs.Float64("ramp-to", 0, "ramp linearly from -rate to this `rate` over the duration")
	var steps stepsFlag
	fs.Var(&steps, "step", "change the rate at a time: `AT=RATE` (10s=800); repeatable (load.steps)")
	arrivals := fs.String("arrivals", "", "constant or poisson (load.arrivals; default constant)")
	duration := fs.Duration("duration", 0, "how long to send (required without -scenario)")
	warmup := fs.Duration("warmup", 0, "leave this first part out of the summary")
	timeout := fs.Duration("timeout", 0, "client timeout from each request's intended send time (load.timeout; 0: none)")
	burst := fs.Int("burst", 0, "send bursts of `N` requests at once (load.bursts.size)")
	burstEvery := fs.Duration("burst-every", 0, "time between bursts (load.bursts.every)")
	burstCount := fs.Int("burst-count", 1, "number of bursts (load.bursts.count)")
	burstAt := fs.Duration("burst-at", 0, "time of the first burst (load.bursts.at)")
	maxOut := fs.Int("max-outstanding", 0, "most requests outstanding at once; sends beyond are skipped (load.client_workers; default 10000)")
	clients := fs.Int("clients", 1, "distinct clients, in turn")
	via := fs.String("clients-via", load.ViaAddr, "how clients differ: addr (127.0.x.y source addresses) or xff (X-Forwarded-For)")
	timescale := fs.Float64("timescale", 1, "multiply the schedule's durations and divide its rates by `F`")
	seed := fs.Uint64("seed", 0, "seed of the Poisson arrivals (default: the scenario's, whose arrivals are then the simulator's; else random)")
	method := fs.String("method", "GET", "request method")
	var headers headerFlag
	fs.Var(&headers, "H", "add a request header `'Name: value'`; repeatable")
	conns := fs.Int("connections", load.DefaultConnections, "most open connections per client; -1: no cap")
	noKeepAlive := fs.Bool("no-keepalive", false, "open a new connection for every request")
	reasonHeader := fs.String("reason-header", load.DefaultReasonHeader, "response header that names a rejection's reason")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a summary")
	series := fs.String("series", "", "write the per-interval series as CSV to `FILE`")
	interval := fs.Duration("interval", time.Second, "width of one point of the series")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}

	cfg := load.Config{URL: pos[0]}
	var sf *scenario.File
	if *file != "" {
		f, err := loadScenario(*file)
		if err != nil {
			return badScenario(e, "load", err)
		}
		sf = f
		cfg.Load, cfg.Duration, cfg.Warmup, cfg.Seed = f.Load, f.Duration, f.Warmup, f.Seed
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["rate"] {
		cfg.Rate = *rate
	}
	if set["arrivals"] {
		cfg.Arrivals = sim.ArrivalKind(*arrivals)
	}
	if set["duration"] {
		cfg.Duration = *duration
	}
	if set["warmup"] {
		cfg.Warmup = *warmup
	}
	if set["timeout"] {
		cfg.Timeout = *timeout
	}
	if set["max-outstanding"] {
		cfg.ClientWorkers = *maxOut
		if *maxOut <= 0 || *maxOut > load.MaxOutstanding {
			return usageError(fs, "-max-outstanding", fmt.Errorf("must be in [1, %d], got %d", load.MaxOutstanding, *maxOut))
		}
	}
	switch {
	case set["seed"]:
		cfg.Seed = *seed
	case *file == "":
		cfg.Seed = rand.Uint64()
	}
	if len(steps) > 0 {
		cfg.Steps = steps
	}
	if set["ramp-to"] {
		if len(steps) > 0 {
			return usageError(fs, "-ramp-to", errors.New("use -step or -ramp-to, not both"))
		}
		if cfg.Duration <= 0 {
			return usageError(fs, "-ramp-to", errors.New("needs -duration"))
		}
		cfg.Ramp = true
		cfg.Steps = []sim.Step{{At: cfg.Duration, Rate: *rampTo}}
	}
	if set["burst"] {
		cfg.Bursts = sim.Bursts{Size: *burst, Every: *burstEvery, Count: *burstCount, At: *burstAt}
	} else if names := flagNames(set, "burst-count", "burst-every", "burst-at"); names != "" {
		// They shape the bursts -burst asks for; alone they were
		// ignored, and the run sent none (or the file's, unchanged).
		return usageError(fs, names, errors.New("needs -burst (the requests in each burst)"))
	}
	if set["clients"] && *clients <= 0 {
		return usageError(fs, "-clients", fmt.Errorf("must be > 0, got %d", *clients))
	}
	if set["interval"] && *interval <= 0 {
		return usageError(fs, "-interval", fmt.Errorf("must be > 0, got %v", *interval))
	}
	cfg.Clients, cfg.ClientsVia, cfg.TimeScale = *clients, *via, *timescale
	if !(*timescale > 0) { // the library reads 0 as its default
		return usageError(fs, "-timescale", fmt.Errorf("must be > 0, got %v", *timescale))
	}
	cfg.Method, cfg.Header, cfg.DisableKeepAlive, cfg.Connections = *method, http.Header(headers), *noKeepAlive, *conns
	if *conns == 0 || *conns < -1 || *conns > load.MaxConnections {
		return usageError(fs, "-connections", fmt.Errorf("must be in [1, %d], or -1 for no cap, got %d", load.MaxConnections, *conns))
	}
	cfg.ReasonHeader, cfg.Interval = *reasonHeader, *interval
	if !*asJSON && isTerminal(e.stdout) {
		cfg.Progress = e.stdout
	}
	var seriesFile *outfile.File
	if *series != "" {
		// As sim's -plot: checked now, in place only once written.
		f, err := outfile.Create(*series)
		if err != nil {
			return usageError(fs, "-series", err)
		}
		seriesFile = f
		defer f.Discard()
	}

	ctx, stop := signalContext()
	defer stop()
	// The generator's heap is small and its garbage is per request: fewer
	// collections leave more of a small machine's CPU to sending (the
	// collector was a tenth of it at 20,000 requests per second).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	res, err := load.Run(ctx, cfg)
	switch {
	case res == nil && errors.Is(err, load.ErrUnreachable):
		fmt.Fprintf(e.stderr, "sluice load: %v\n", err)
		return ExitFail
	case res == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		fmt.Fprintln(e.stderr, "sluice load: interrupted before the first send")
		return ExitFail
	case res == nil && err != nil:
		if ferr := inFile(sf, set, err, fileFields); ferr != nil {
			return badScenario(e, "load", ferr)
		}
		if name, problem, ok := asFlag(err, sf == nil && !set["duration"], set["ramp-to"]); ok {
			return usageError(fs, name, errors.New(problem))
		}
		return configError(fs, err) // the config: nothing was sent
	}
	if *asJSON {
		err = res.WriteJSON(e.stdout)
	} else {
		err = res.WriteText(e.stdout)
	}
	if err == nil && seriesFile != nil {
		err = res.WriteSeries(seriesFile)
		if err == nil {
			err = seriesFile.Commit()
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice load: writing the result: %v\n", err)
		return ExitFail
	}
	if res.Interrupted {
		fmt.Fprintln(e.stderr, "sluice load: interrupted")
		return ExitFail
	}
	return ExitOK
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// stepsFlag collects -step AT=RATE.
type stepsFlag []sim.Step

func (s *stepsFlag) String() string { return "" }
func (s *stepsFlag) Set(v string) error {
	at, r, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want AT=RATE (10s=800), got %q", v)
	}
	d, err := time.ParseDuration(at)
	if err != nil {
		return fmt.Errorf("time %q: %v", at, err)
	}
	rate, err := strconv.ParseFloat(r, 64)
	if err != nil {
		return fmt.Errorf("rate %q: not a number", r)
	}
	*s = append(*s, sim.Step{At: d, Rate: rate})
	return nil
}

// headerFlag collects -H 'Name: value'.
type headerFlag http.Header

func (h *headerFlag) String() string { return "" }
func (h *headerFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	if *h == nil {
		*h = headerFlag{}
	}
	http.Header(*h).Add(name, strings.TrimSpace(val))
	return nil
}

// fileFields are the load settings a scenario file gives, with the flags
// that override each (none: nothing does); a step's or a burst's field
// goes by its section (see inFile).
var fileFields = map[string][]string{
	"duration": {"duration"}, "warmup": {"warmup"}, "load.rate": {"rate"}, "load.arrivals": {"arrivals"},
	"load.timeout": {"timeout"}, "load.client_workers": {"max-outstanding"}, "load.retries": nil,
	"load.steps": {"step", "ramp-to"}, "load.ramp": {"step", "ramp-to"}, "load.bursts": {"burst"},
}

// flagFields are the flags (and the URL argument) that set load settings,
// by the setting's name in a config error.
var flagFields = map[string]string{
	"url": "URL", "duration": "-duration", "warmup": "-warmup", "load.rate": "-rate",
	"load.arrivals": "-arrivals", "load.timeout": "-timeout", "load.client_workers": "-max-outstanding",
	"load.bursts.size": "-burst", "load.bursts.count": "-burst-count", "load.bursts.every": "-burst-every",
	"load.bursts.at": "-burst-at", "clients": "-clients", "clients_via": "-clients-via",
	"method": "-method", "header": "-H", "timescale": "-timescale", "interval": "-interval",
	"connections": "-connections",
}

// asFlag names the flag behind a config error that no scenario file
// placed (see inFile): the user typed -rate, not load.rate. A duration
// that nothing gave is missing, not out of range. rampTo says the steps
// are -ramp-to's one, not -step's.
func asFlag(err error, noDuration, rampTo bool) (name, problem string, ok bool) {
	field, problem, ok := lab.ConfigProblem(err)
	if !ok {
		return "", "", false
	}
	name, ok = flagFields[field]
	switch {
	case strings.HasPrefix(field, "load.steps[") && rampTo: // the step -ramp-to made
		name, ok = "-ramp-to", true
	case strings.HasPrefix(field, "load.steps["): // the n-th -step
		name, ok, problem = "-step", true, field[len("load."):]+": "+problem
	}
	if !ok {
		return "", "", false
	}
	if field == "duration" && noDuration {
		problem = "required (or give -scenario FILE)"
	}
	return name, problem, true
}

// inFile places a config error at its line in the scenario file f when
// the field came from the file, or returns nil. fields are the settings a
// file gives, with the flags that override each: a field goes by its
// nearest listed section (load.steps[2].rate by load.steps), and when one
// of its flags was set the value was the flag's, not the file's.
func inFile(f *scenario.File, set map[string]bool, err error, fields map[string][]string) error {
	if f == nil {
		return nil
	}
	field, problem, ok := lab.ConfigProblem(err)
	if !ok {
		return nil
	}
	key := field
	flags, ok := fields[key]
	for !ok {
		i := strings.LastIndexAny(key, ".[")
		if i <= 0 {
			return nil
		}
		key = key[:i]
		flags, ok = fields[key]
	}
	for _, name := range flags {
		if set[name] {
			return nil // the flag's value, not the file's
		}
	}
	return f.ErrorAt(field, problem, err)
}
