package load

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/timescale"
	"github.com/sluicehq/sluice/sim"
)

// DefaultReasonHeader is the response field read for the reason of a
// rejection: the one sluice origin writes (origin.ReasonHeader), and the
// one to set from the middleware's OnReject or the proxy.
const DefaultReasonHeader = "Sluice-Reason"

// Defaults for the Config fields whose zero value means "default".
const (
	DefaultMaxOutstanding = 10_000
	DefaultConnections    = 1024
	DefaultInterval       = time.Second
	DefaultDrain          = 5 * time.Second
	DefaultLateAfter      = 5 * time.Millisecond
)

// Bounds on what a Config may ask for: past them a typo, not a plan.
const (
	MaxClients = 64_000 // distinct 127.0.x.y source addresses
	MaxRate    = 1e6    // requests per second
	// MaxConnections bounds Connections: a client's connections to the
	// target all leave from one source address, which has no more ports.
	MaxConnections = 65_535
	// MaxOutstanding bounds ClientWorkers: Run holds a queue slot for
	// each up front (24 MB at the bound).
	MaxOutstanding = 1_000_000
	// MaxIntervals bounds the series: each point with successes holds a
	// latency histogram of about 27 kB, so a series costs at most ~100 MB.
	MaxIntervals = 3600
)

// How several clients are told apart (Config.ClientsVia).
const (
	// ViaAddr gives client i its own source address, 127.0.(i/250).(1+i%250),
	// with its own connections: what a server sees as RemoteAddr. The
	// target must be on loopback.
	ViaAddr = "addr"
	// ViaXFF sends client i's address, 10.0.(i/250).(1+i%250), in
	// X-Forwarded-For, for a server or proxy that trusts this peer.
	ViaXFF = "xff"
)

// Config configures a Run. The zero value of every field but URL, Load
// and Duration is a usable default.
type Config struct {
	// URL is the target, http:// or https://. Required.
	URL string
	// Method is the request method. Default GET.
	Method string
	// Header is added to every request. A Host field (one value) sets
	// the request's Host, for a virtual host other than the URL's.
	// Default none.
	Header http.Header
	// DisableKeepAlive opens a new connection for every request. Default
	// false: connections are kept and reused.
	DisableKeepAlive bool
	// Connections caps each client's open connections to the target; a
	// request due while all are busy waits for one (its latency, measured
	// from the intended time, includes the wait), so the cap must be above
	// the concurrency the experiment needs (rate × latency, or a burst's
	// size), or the generator becomes a limiter itself. The default is
	// generous for that reason. At tens of thousands of requests per
	// second on a small machine, cap it near the concurrency actually
	// needed (32-64, as wrk's -c): HTTP/1.1 holds a connection per
	// outstanding request, and once a stall makes the generator fall
	// behind, hundreds of busy connections cost more than they carry, and
	// it does not catch up (docs/benchmarks.md). Default
	// DefaultConnections; at most MaxConnections; -1: no cap.
	Connections int

	// Load is the schedule, as in a scenario file's load: section
	// (sim.Load documents each field): the arrival process, the rate,
	// steps or a ramp, bursts, the client Timeout (from each request's
	// intended send time), and ClientWorkers, the most requests
	// outstanding at once (a send due while that many are outstanding is
	// skipped and counted; 0: DefaultMaxOutstanding; at most
	// MaxOutstanding). Retries are not
	// supported: they must be zero.
	sim.Load
	// Duration is how long the schedule runs. Required.
	Duration time.Duration
	// Warmup is left out of the summary (the series still shows it), as
	// in a scenario. Default 0.
	Warmup time.Duration
	// TimeScale multiplies the schedule's durations (Duration, Warmup,
	// the steps' and bursts' times, Timeout) and divides its rates, so
	// that a run against an origin with the same TimeScale keeps the
	// ratios. Default (0) 1; must be in (0, 1000], and no scaled
	// duration may exceed the longest time.Duration (about 292 years).
	// The scaled schedule must keep the bounds the given one has: a
	// Duration and a set Timeout above 0, steps in increasing time order,
	// every rate (the bursts' too: Size per Every) at most MaxRate.
	TimeScale float64
	// Seed seeds the Poisson arrivals: with a scenario's seed they are the
	// simulator's send times (sim.ArrivalRand). Default 0, a seed like any
	// other; the command picks a random one when given none.
	Seed uint64

	// Clients is how many distinct clients send the load, in turn (for
	// per-key limits). Default (0) 1: one client, the system's source
	// address. At most MaxClients.
	Clients int
	// ClientsVia is how the clients differ: ViaAddr (default) or ViaXFF.
	ClientsVia string

	// ReasonHeader is the response field read for a rejection's reason.
	// Default DefaultReasonHeader.
	ReasonHeader string
	// OffsetHeader, when set, names a request field that carries each
	// request's intended send time, as nanoseconds from the run's start:
	// a server can then count requests by the generator's window (Warmup
	// to Duration), as the summary does, whatever their lag. Default
	// none: the request template is shared and not copied.
	OffsetHeader string
	// Interval is the width of one point of the series. Default
	// DefaultInterval; at most MaxIntervals points (an hour at 1 s: a
	// longer run needs a wider Interval).
	Interval time.Duration
	// LateAfter is how far behind its intended time a send may go before
	// it is counted late. Default DefaultLateAfter. Latency is measured
	// from the intended time whatever it is.
	LateAfter time.Duration
	// Drain bounds the wait for outstanding responses after the schedule
	// ends when there is no Timeout; they are then cancelled and counted
	// as unfinished. Default DefaultDrain.
	Drain time.Duration
	// Progress, if not nil, receives a progress line every second,
	// rewritten in place ("\r"), and a newline at the end. Default nil.
	Progress io.Writer
}

// Validate checks c as Run does first, without sending anything: a
// *sluice.ConfigError names the field at fault.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate checks c, fills in its defaults and applies TimeScale. Field
// names follow the scenario file's keys (load.rate) and the flags'.
func (c Config) validate() (Config, error) {
	bad := func(field string, v any, allowed string) (Config, error) {
		return c, sluice.NewConfigError("load", field, v, allowed)
	}
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return bad("url", nil, "is required")
	case !strings.Contains(c.URL, "://"):
		// 127.0.0.1:8080 parses as a scheme and an opaque part, or not at
		// all ("first path segment in URL cannot contain colon").
		return bad("url", c.URL, "must be an http:// or https:// URL, like http://"+c.URL)
	case err != nil:
		return bad("url", c.URL, "not a URL: "+err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("url", c.URL, "must be an http:// or https:// URL")
	case u.Hostname() == "":
		// http://:80/ has the host ":80", which net/http dials as this
		// machine's port: a run would measure whatever listens there.
		return bad("url", c.URL, "has no host")
	}
	if c.Method == "" {
		c.Method = http.MethodGet
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.ClientsVia == "" {
		c.ClientsVia = ViaAddr
	}
	if c.ReasonHeader == "" {
		c.ReasonHeader = DefaultReasonHeader
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.LateAfter == 0 {
		c.LateAfter = DefaultLateAfter
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.Connections == 0 {
		c.Connections = DefaultConnections
	}
	if c.ClientWorkers == 0 {
		c.ClientWorkers = DefaultMaxOutstanding
	}
	if c.Arrivals == "" {
		c.Arrivals = sim.ConstantArrivals
	}
	switch {
	case strings.ContainsAny(c.Method, " \t\r\n") || !validToken(c.Method):
		return bad("method", c.Method, "not an HTTP method")
	case !(c.TimeScale > 0 && c.TimeScale <= 1000):
		return bad("timescale", c.TimeScale, "must be in (0, 1000]")
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return bad("duration", c.Duration, "must be in (0, 24h]")
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return bad("warmup", c.Warmup, "must be in [0, duration)")
	case c.Clients < 0 || c.Clients > MaxClients:
		return bad("clients", c.Clients, fmt.Sprintf("must be in [1, %d]", MaxClients))
	case c.ClientsVia != ViaAddr && c.ClientsVia != ViaXFF:
		return bad("clients_via", c.ClientsVia, `must be "addr" or "xff"`)
	case c.Interval < 0:
		return bad("interval", c.Interval, "must be > 0")
	case c.LateAfter < 0:
		return bad("late_after", c.LateAfter, "must be > 0")
	case c.Connections < -1 || c.Connections > MaxConnections:
		return bad("connections", c.Connections, fmt.Sprintf("must be in [1, %d], or -1 for no cap", MaxConnections))
	case c.Drain < 0:
		return bad("drain", c.Drain, "must be > 0")
	case c.ClientWorkers < 0 || c.ClientWorkers > MaxOutstanding:
		return bad("load.client_workers", c.ClientWorkers, fmt.Sprintf("must be in [0, %d] (0: default)", MaxOutstanding))
	case c.Retries != (sim.Retries{}):
		return bad("load.retries", nil, "retries are not supported by the load generator")
	case c.Timeout < 0:
		return bad("load.timeout", c.Timeout, "must be >= 0 (0: none)")
	case c.Arrivals != sim.ConstantArrivals && c.Arrivals != sim.PoissonArrivals:
		return bad("load.arrivals", c.Arrivals, "must be constant or poisson")
	}
	var hosts []string // under "Host", or a key that is not canonical
	for k, vs := range c.Header {
		// net/http refuses to send a request with either, and every
		// request of the run would fail.
		if !validToken(k) {
			return bad("header", strconv.Quote(k+": "+strings.Join(vs, ", ")), "not a header field name")
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return bad("header", strconv.Quote(k+": "+v), "a header value holds no control characters but tab")
			}
		}
		if http.CanonicalHeaderKey(k) == "Host" {
			hosts = append(hosts, vs...)
		}
	}
	if len(hosts) > 1 {
		return bad("header", "Host: "+strings.Join(hosts, ", "), "a request has one Host: give it once")
	}
	if c.Clients > 1 && c.ClientsVia == ViaAddr && !loopbackHost(u.Hostname()) {
		return bad("clients", c.Clients, "distinct source addresses (clients_via addr) need a loopback target, got host "+u.Hostname())
	}
	if !validRate(c.Rate) {
		return bad("load.rate", c.Rate, fmt.Sprintf("must be in [0, %g]", MaxRate))
	}
	var last time.Duration
	for i, st := range c.Steps {
		f := fmt.Sprintf("load.steps[%d]", i)
		if st.At <= last {
			return bad(f+".at", st.At, "steps must be after 0 and in increasing time order")
		}
		last = st.At
		if !validRate(st.Rate) {
			return bad(f+".rate", st.Rate, fmt.Sprintf("must be in [0, %g]", MaxRate))
		}
	}
	if c.Ramp && len(c.Steps) == 0 {
		return bad("load.ramp", true, "needs at least one step to ramp to")
	}
	b := c.Bursts
	switch {
	case b.Size < 0 || b.Size > int(MaxRate):
		return bad("load.bursts.size", b.Size, fmt.Sprintf("must be in [0, %g]", MaxRate))
	case b.Size > 0 && b.Count <= 0:
		return bad("load.bursts.count", b.Count, "must be > 0 with bursts")
	case b.Size > 0 && b.Count > 1 && b.Every <= 0:
		return bad("load.bursts.every", b.Every, "must be > 0 with more than one burst")
	case b.At < 0:
		return bad("load.bursts.at", b.At, "must be >= 0")
	case b.Size == 0 && b != (sim.Bursts{}):
		return bad("load.bursts.size", b.Size, "must be > 0 when bursts are configured")
	case c.Rate == 0 && b.Size == 0 && len(c.Steps) == 0:
		return bad("load.rate", c.Rate, "no load: set a rate, steps or bursts")
	}
	orig := c
	if c, err = c.scaled(); err != nil {
		return c, err
	}
	if err := c.checkScaled(orig); err != nil {
		return c, err
	}
	// The series spans the scaled duration; Interval is not scaled.
	if n := float64(c.Duration) / float64(c.Interval); n > MaxIntervals {
		return bad("interval", c.Interval, fmt.Sprintf("too small for duration %v: at most %d points (use an interval of at least %v)", c.Duration, MaxIntervals, (c.Duration+MaxIntervals-1)/MaxIntervals))
	}
	return c, nil
}

func validRate(r float64) bool { return r >= 0 && r <= MaxRate && !math.IsNaN(r) }

// validToken reports whether s is an HTTP token (a method name).
func validToken(s string) bool {
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return s != ""
}

// validHeaderValue reports whether net/http sends v as a field value: no
// control character but a tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// scaled applies TimeScale: durations times f, rates over f. It refuses,
// naming the field, a duration that f scales past what a time.Duration
// holds (validate's bounds keep Duration and Warmup from it; Timeout, the
// steps' and the bursts' times have none).
func (c Config) scaled() (Config, error) {
	f := c.TimeScale
	if f == 1 {
		return c, nil
	}
	var err error
	d := func(field string, x time.Duration) time.Duration {
		v, ok := timescale.Scale(x, f)
		if !ok && err == nil {
			err = sluice.NewConfigError("load", field, x, timescale.TooLong(f))
		}
		return v
	}
	c.Duration, c.Warmup, c.Timeout = d("duration", c.Duration), d("warmup", c.Warmup), d("load.timeout", c.Timeout)
	c.Rate /= f
	c.Steps = append([]sim.Step(nil), c.Steps...)
	for i := range c.Steps {
		c.Steps[i].At = d(fmt.Sprintf("load.steps[%d].at", i), c.Steps[i].At)
		c.Steps[i].Rate /= f
	}
	c.Bursts.At, c.Bursts.Every = d("load.bursts.at", c.Bursts.At), d("load.bursts.every", c.Bursts.Every)
	return c, err
}

// checkScaled checks c, orig after scaled, against the bounds validate
// checked on orig: a small TimeScale rounds durations down to nothing and
// multiplies rates past MaxRate (a 1 s run at 1e-300 ran for 0 s; 1e6/s at
// 1e-3 offered 1e9/s; both "passed"). The error names the timescale, which
// moved the value out of bounds, and the setting it moved.
func (c Config) checkScaled(orig Config) error {
	f := c.TimeScale
	bad := func(field string, from, to any, allowed string) error {
		if f == 1 {
			return sluice.NewConfigError("load", field, to, allowed)
		}
		return sluice.NewConfigError("load", "timescale", f, fmt.Sprintf("scales %s from %v to %v, which %s", field, from, to, allowed))
	}
	maxRate := fmt.Sprintf("must be at most %g/s", MaxRate)
	switch {
	case c.Duration <= 0:
		return bad("duration", orig.Duration, c.Duration, "must be > 0")
	case c.Warmup >= c.Duration:
		return bad("warmup", orig.Warmup, c.Warmup, "must be less than the duration, "+c.Duration.String())
	case orig.Timeout > 0 && c.Timeout <= 0: // 0 would mean no timeout
		return bad("load.timeout", orig.Timeout, c.Timeout, "must be > 0")
	case !validRate(c.Rate):
		return bad("load.rate", orig.Rate, c.Rate, maxRate)
	}
	var last time.Duration
	for i, st := range c.Steps {
		field := fmt.Sprintf("load.steps[%d]", i)
		if st.At <= last {
			return bad(field+".at", orig.Steps[i].At, st.At, "must be after 0 and after the step before")
		}
		last = st.At
		if !validRate(st.Rate) {
			return bad(field+".rate", orig.Steps[i].Rate, st.Rate, maxRate)
		}
	}
	if b := c.Bursts; b.Size > 0 && b.Count > 1 {
		if b.Every <= 0 {
			return bad("load.bursts.every", orig.Bursts.Every, b.Every, "must be > 0 with more than one burst")
		}
		// Bursts one after another are a rate too: size per every.
		if r := float64(b.Size) / b.Every.Seconds(); !validRate(r) {
			return bad("load.bursts.every", orig.Bursts.Every, b.Every,
				fmt.Sprintf("must leave the bursts' rate (%d requests each every) at most %g/s, not %g/s", b.Size, MaxRate, r))
		}
	}
	return nil
}
