package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/origin"
	"github.com/sluicehq/sluice/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func TestRunKeepsSchedule(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
	}))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 200, Timeout: time.Second}, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned != 200 || res.Sent != 200 || res.Skipped != 0 || res.OK != 200 || res.Good != 200 || res.Status[200] != 200 {
		t.Errorf("200/s for 1s: %+v", res)
	}
	if res.Goodput != 200 || res.Offered != 200 {
		t.Errorf("goodput %v, offered %v, want 200 and 200", res.Goodput, res.Offered)
	}
	if res.Success.Count != 200 || res.Success.Max <= 0 || res.Success.Max > time.Second {
		t.Errorf("success latency: %+v", res.Success)
	}
	if len(res.Series) != 1 || res.Series[0].Goodput != 200 {
		t.Errorf("series: %+v", res.Series)
	}
	// Keep-alive: a handful of connections, not one per request.
	if len(conns) > 50 {
		t.Errorf("%d connections for 200 requests: keep-alive not used", len(conns))
	}
}

func TestRunAgainstOrigin(t *testing.T) {
	o, err := origin.New(origin.Config{Origin: sim.Origin{Workers: 2, Service: sim.Dist{Kind: sim.Constant, Mean: 50 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	res, err := Run(context.Background(), Config{URL: serve(t, o), Load: sim.Load{Rate: 100, Timeout: time.Second}, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 2 workers of 50 ms serve at most 40/s; the origin refuses the rest
	// with its reason.
	if res.OK+res.Rejected != res.Sent || res.Rejected == 0 || res.Reasons[origin.ReasonQueueFull] != res.Rejected {
		t.Errorf("result: %+v", res)
	}
	if res.OK > 42 || res.Status[503] != res.Rejected {
		t.Errorf("%d 2xx from an origin that serves 40/s; status %v", res.OK, res.Status)
	}
	if st := o.Stats(); st.MaxInFlight < 2 || int64(st.Served) != res.OK {
		t.Errorf("origin: %+v, load saw %d 2xx", st, res.OK)
	}
	if res.Rejection.Count != res.Rejected || res.Rejection.P50 > res.Success.P50 {
		t.Errorf("rejections: %+v, successes: %+v", res.Rejection, res.Success)
	}
}

func TestRunTimeout(t *testing.T) {
	release := make(chan struct{})
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 20, Timeout: 100 * time.Millisecond}, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 10 || res.Errors["timeout"] != 10 || res.Good != 0 || res.Goodput != 0 {
		t.Errorf("every request past its timeout: %+v", res)
	}
	// Measured from the intended send time, each gave up at 100 ms.
	if f := res.Failure; f.P50 < 100*time.Millisecond || f.Max > 200*time.Millisecond {
		t.Errorf("timeout latency: %+v", f)
	}
}

func TestRunUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Run(context.Background(), Config{URL: "http://" + addr + "/", Load: sim.Load{Rate: 10}, Duration: time.Minute})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("closed port: %v, want ErrUnreachable", err)
	}
	if el := time.Since(start); el >= time.Second {
		t.Errorf("unreachable reported after %v", el)
	}
}

func TestRunClients(t *testing.T) {
	for _, via := range []string{ViaAddr, ViaXFF} {
		var mu sync.Mutex
		seen := map[string]int{}
		url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, _, _ := net.SplitHostPort(r.RemoteAddr)
			if via == ViaXFF {
				key = r.Header.Get("X-Forwarded-For")
			}
			mu.Lock()
			seen[key]++
			mu.Unlock()
		}))
		res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 100}, Duration: 500 * time.Millisecond, Clients: 5, ClientsVia: via})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK != 50 || len(seen) != 5 {
			t.Errorf("via %s: %d 2xx, clients seen %v", via, res.OK, seen)
		}
		for k, n := range seen {
			if n != 10 {
				t.Errorf("via %s: client %s sent %d, want 10", via, k, n)
			}
		}
	}
}

// TestRunLargestConnectionCap: the largest Connections, over several
// clients, still sends the schedule.
func TestRunLargestConnectionCap(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	res, err := Run(context.Background(), Config{URL: url, Connections: MaxConnections, Clients: 2,
		Load: sim.Load{Rate: 100, ClientWorkers: MaxOutstanding}, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 20 || res.OK != 20 {
		t.Errorf("sent %d, 2xx %d; want 20 and 20", res.Sent, res.OK)
	}
}

func TestRunInterrupted(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Config{URL: url, Load: sim.Load{Rate: 100}, Duration: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.Interrupted {
		t.Fatalf("interrupted run: %v, %+v", err, res)
	}
	if time.Since(start) > 2*time.Second || res.OK == 0 {
		t.Errorf("interrupted after %v with %d 2xx", time.Since(start), res.OK)
	}
}

// A URL without its scheme, as a host:port is often written, says what to
// write instead of the parser's "first path segment cannot contain colon".
func TestConfigURLWithoutScheme(t *testing.T) {
	c := Config{URL: "127.0.0.1:8080", Load: sim.Load{Rate: 1}, Duration: time.Second}
	_, err := c.validate()
	if want := "like http://127.0.0.1:8080"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("validate(%q) = %v, want an error saying %q", c.URL, err, want)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:1/", Load: sim.Load{Rate: 1}, Duration: time.Second}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"url", func(c *Config) { c.URL = "" }},
		{"url", func(c *Config) { c.URL = "ftp://x/" }},
		{"url", func(c *Config) { c.URL = "http://:80/" }}, // a port, no host: this machine's
		{"method", func(c *Config) { c.Method = "GE T" }},
		{"duration", func(c *Config) { c.Duration = 0 }},
		{"warmup", func(c *Config) { c.Warmup = time.Second }},
		{"load.rate", func(c *Config) { c.Rate = -1 }},
		{"load.rate", func(c *Config) { c.Rate = 0 }},
		{"load.timeout", func(c *Config) { c.Timeout = -1 }},
		{"load.arrivals", func(c *Config) { c.Arrivals = "uniform" }},
		{"load.steps[1].at", func(c *Config) { c.Steps = []sim.Step{{At: 2 * time.Second, Rate: 1}, {At: time.Second, Rate: 2}} }},
		{"load.retries", func(c *Config) { c.Retries.Max = 1 }},
		{"load.bursts.count", func(c *Config) { c.Bursts.Size = 5 }},
		{"clients", func(c *Config) { c.Clients = MaxClients + 1 }},
		{"clients", func(c *Config) { c.Clients = 2; c.URL = "http://example.com/" }},
		{"clients_via", func(c *Config) { c.ClientsVia = "dns" }},
		// Connections × clients overflowed: no worker, nothing sent,
		// every request counted Sent.
		{"connections", func(c *Config) { c.Connections, c.Clients = 1<<62, 2 }},
		{"connections", func(c *Config) { c.Connections = MaxConnections + 1 }},
		// The queue of ClientWorkers slots: makechan panicked.
		{"load.client_workers", func(c *Config) { c.ClientWorkers = 1 << 62 }},
		{"header", func(c *Config) { c.Header = http.Header{"Host": {"a.example", "b.example"}} }},
		{"header", func(c *Config) { c.Header = http.Header{"Host": {"a.example"}, "host": {"b.example"}} }},
		// net/http refuses to send these: every request failed as
		// "other", and the run still passed for a run.
		{"header", func(c *Config) { c.Header = http.Header{"Bad(Name": {"x"}} }},
		{"header", func(c *Config) { c.Header = http.Header{"X-Ok": {"a\nb"}} }},
		{"header", func(c *Config) { c.Header = http.Header{"X-Ok": {"a\x00b"}} }},
		{"timescale", func(c *Config) { c.TimeScale = -1 }},
		// Scaled past what a time.Duration holds, they wrapped negative:
		// the timeout was off, the step and the burst came at once.
		{"load.timeout", func(c *Config) { c.TimeScale, c.Timeout = 1000, 10000*time.Hour }},
		{"load.steps[0].at", func(c *Config) { c.TimeScale, c.Steps = 1000, []sim.Step{{At: 10000 * time.Hour, Rate: 2}} }},
		{"load.bursts.at", func(c *Config) { c.TimeScale, c.Bursts = 1000, sim.Bursts{Size: 1, Count: 1, At: 10000 * time.Hour} }},
		{"load.bursts.every", func(c *Config) {
			c.TimeScale, c.Bursts = 1000, sim.Bursts{Size: 1, Count: 2, Every: 10000 * time.Hour}
		}},
		{"interval", func(c *Config) { c.Interval = time.Nanosecond }},
	} {
		c := ok
		tc.edit(&c)
		_, err := Run(context.Background(), c)
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
}

func TestTimeScale(t *testing.T) {
	c, err := Config{URL: "http://127.0.0.1:1/", TimeScale: 0.05, Duration: 60 * time.Second,
		Load: sim.Load{Rate: 5, Timeout: 2500 * time.Millisecond, Steps: []sim.Step{{At: 20 * time.Second, Rate: 10}}}}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.Duration != 3*time.Second || c.Rate != 100 || c.Timeout != 125*time.Millisecond || c.Steps[0].At != time.Second || c.Steps[0].Rate != 200 {
		t.Errorf("scaled by 0.05: %+v", c)
	}
	// 2562h × 1000 is just under the longest time.Duration, 2562047h.
	c, err = Config{URL: "http://127.0.0.1:1/", TimeScale: 1000, Duration: time.Second, Load: sim.Load{Rate: 1, Timeout: 2562 * time.Hour}}.validate()
	if err != nil || c.Timeout != 2562000*time.Hour {
		t.Errorf("timeout 2562h at timescale 1000: %v, %v", c.Timeout, err)
	}
}

// TestRunReportsSkipped: a client allowed one outstanding request against
// a server that takes 50 ms cannot send 100/s, and says so.
func TestRunReportsSkipped(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(50 * time.Millisecond) }))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 100, ClientWorkers: 1}, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned != 50 || res.Sent+res.Skipped != 50 || res.Sent > 11 || res.Skipped < 39 || res.OK != res.Sent {
		t.Errorf("one worker at 50 ms, 100/s planned: planned %d, sent %d, skipped %d, 2xx %d", res.Planned, res.Sent, res.Skipped, res.OK)
	}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil || !strings.Contains(text.String(), "NOT KEPT") {
		t.Errorf("summary does not say the schedule was not kept (%v):\n%s", err, text.String())
	}
}

// TestRunWarmupAndSeries: the warm-up is left out of the counts, not out of
// the series; the progress line is written while the run goes on.
func TestRunWarmupAndSeries(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var progress strings.Builder
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 20, Steps: []sim.Step{{At: time.Second, Rate: 40}}},
		Duration: 1500 * time.Millisecond, Warmup: time.Second, Interval: 500 * time.Millisecond, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned != 20 || res.OK != 20 || res.Goodput != 40 || res.Offered != 40 {
		t.Errorf("after a 1 s warm-up, 40/s for 0.5 s: %+v", res)
	}
	want := []float64{20, 20, 40}
	if len(res.Series) != 3 {
		t.Fatalf("series: %+v", res.Series)
	}
	for i, p := range res.Series {
		if p.Offered != want[i] || p.Goodput != want[i] || p.T != time.Duration(i+1)*500*time.Millisecond {
			t.Errorf("point %d: %+v, want %v/s", i, p, want[i])
		}
	}
	if !strings.Contains(progress.String(), "\r    1s / 1.5s  sent ") || !strings.HasSuffix(progress.String(), "\n") {
		t.Errorf("progress: %q", progress.String())
	}
	var csv strings.Builder
	if err := res.WriteSeries(&csv); err != nil || strings.Count(csv.String(), "\n") != 4 {
		t.Errorf("series CSV (%v):\n%s", err, csv.String())
	}
}

// TestRunReasonsCapped: a server that names a new reason on every answer
// does not grow the result without bound.
func TestRunReasonsCapped(t *testing.T) {
	var n atomic.Int64
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(DefaultReasonHeader, strconv.FormatInt(n.Add(1), 10)+strings.Repeat("x", 100))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 400}, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 200 || len(res.Reasons) != maxReasons || res.Reasons[otherReasons] != 200-maxReasons+1 {
		t.Errorf("%d rejected, %d reasons", res.Rejected, len(res.Reasons))
	}
	var sum int64
	for k, v := range res.Reasons {
		sum += v
		if len(k) > maxReasonLen {
			t.Errorf("reason of %d bytes kept", len(k))
		}
	}
	if sum != 200 {
		t.Errorf("reasons add up to %d, want 200", sum)
	}
}

// TestRunReasonsValidUTF8: the reasons are cut at a character and made
// valid UTF-8 before they are counted, so that the JSON result, which
// writes each invalid byte as U+FFFD, names each once and keeps every
// count. A character cut through (é and €, after 63 bytes) or bytes that
// are not UTF-8 made distinct keys that JSON wrote as one name twice.
func TestRunReasonsValidUTF8(t *testing.T) {
	long := strings.Repeat("a", maxReasonLen-1)
	reasons := []string{long + "é", long + "€", "bad\xff", "bad\xfe"}
	var n atomic.Int64
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(DefaultReasonHeader, reasons[(n.Add(1)-1)%4])
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 100}, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{long: 10, "bad\uFFFD": 10}
	if res.Rejected != 20 || !maps.Equal(res.Reasons, want) {
		t.Errorf("%d rejected, reasons %v; want 20 and %v", res.Rejected, res.Reasons, want)
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(back.Reasons, res.Reasons) {
		t.Errorf("reasons %v in JSON, %v in the result", back.Reasons, res.Reasons)
	}
}

// TestRunBurstAtOnce: a burst goes out at once even when the previous one
// left fewer workers idle than it has requests. Of the first burst's 100,
// the server answers 50 at once and holds 50; it holds the second burst's
// 100 too, until all 200 are in (or a second passes, to fail
// rather than hang). Workers started only when none was idle sent the
// second burst through the first's 50 idle ones: the other 50 requests
// waited for an answer that was waiting for them.
func TestRunBurstAtOnce(t *testing.T) {
	const size, quick = 100, 50
	var n atomic.Int64
	all := make(chan struct{})
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		if k <= quick {
			return
		}
		if k == 2*size {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(time.Second):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	res, err := Run(context.Background(), Config{URL: url, Duration: 500 * time.Millisecond,
		Load: sim.Load{Bursts: sim.Bursts{Size: size, Count: 2, Every: 300 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 2*size || res.Status[http.StatusServiceUnavailable] != 0 {
		t.Errorf("two bursts of %d: %d answered 2xx, %d held for a second (503): the second burst did not go out at once",
			size, res.OK, res.Status[http.StatusServiceUnavailable])
	}
}

// TestRunOffsetHeader: with OffsetHeader each request carries its intended
// send time from the start, so a server can tell the warm-up's requests
// from the measured window's as the summary does.
func TestRunOffsetHeader(t *testing.T) {
	var mu sync.Mutex
	var offs []time.Duration
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.Header.Get("Offset"), 10, 64)
		if err != nil {
			t.Errorf("offset %q: %v", r.Header.Get("Offset"), err)
		}
		mu.Lock()
		offs = append(offs, time.Duration(n))
		mu.Unlock()
	}))
	_, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 20}, Duration: 500 * time.Millisecond, OffsetHeader: "Offset"})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(offs) != 10 {
		t.Fatalf("%d requests, want 10", len(offs))
	}
	seen := map[time.Duration]bool{}
	for _, o := range offs {
		// Constant arrivals at 20/s: every 50 ms from 0.
		if o%(50*time.Millisecond) != 0 || o < 0 || o >= 500*time.Millisecond || seen[o] {
			t.Errorf("offsets %v: want 0, 50ms, ... 450ms once each", offs)
			break
		}
		seen[o] = true
	}
}

// TestRunInterruptedWhileDraining: ctx ending after the schedule, while Run
// waits for the outstanding answers, interrupts the run as much as ctx
// ending mid-schedule: the requests it cuts short are unfinished, and the
// caller (the command's exit status, the summary's INTERRUPTED) must hear of
// it.
func TestRunInterruptedWhileDraining(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The last of the 10 requests arrives after the schedule is over:
		// send returns as soon as it has handed that one out.
		if n.Add(1) == 10 {
			cancel()
		}
		<-r.Context().Done()
	}))
	// 10 requests over 200 ms, and no Timeout: Run would wait Drain (5 s)
	// for their answers.
	res, err := Run(ctx, Config{URL: url, Load: sim.Load{Rate: 50}, Duration: 200 * time.Millisecond})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
		t.Fatalf("cancelled while draining: err %v, interrupted %v; want context.Canceled and Interrupted", err, res != nil && res.Interrupted)
	}
	if res.Sent != 10 || res.Unfinished != 10 {
		t.Errorf("sent %d, unfinished %d; want 10 and 10", res.Sent, res.Unfinished)
	}
}

// TestRunDeadlineIsNotATimeout: a deadline on the run's context ends the
// run, and the requests it cuts short are unfinished, with or without a
// client Timeout of their own: only a request's own Timeout makes a client
// timeout. The run's deadline, inherited by every request, made them all
// failed "timeout"s.
func TestRunDeadlineIsNotATimeout(t *testing.T) {
	for _, timeout := range []time.Duration{0, 10 * time.Second} {
		url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		res, err := Run(ctx, Config{URL: url, Load: sim.Load{Rate: 50, Timeout: timeout}, Duration: time.Minute})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.Interrupted {
			t.Fatalf("timeout %v: err %v; want the run's deadline, Interrupted", timeout, err)
		}
		if res.Sent == 0 || res.Unfinished != res.Sent || res.Failed != 0 || res.Errors["timeout"] != 0 || res.Series[0].Timeouts != 0 {
			t.Errorf("timeout %v: sent %d, unfinished %d, failed %d, errors %v, series timeouts %v/s; want every request unfinished",
				timeout, res.Sent, res.Unfinished, res.Failed, res.Errors, res.Series[0].Timeouts)
		}
	}
}

// TestRunBrokenRejectionIsAFailure: a rejection whose body never arrives
// (here, past the client's Timeout) is a failure of its kind, like any
// answer whose body broke off: its status line and reason do not make it a
// rejection.
func TestRunBrokenRejectionIsAFailure(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(DefaultReasonHeader, "queue_full")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the 100 bytes never come
	}))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 20, Timeout: 100 * time.Millisecond}, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 4 || res.Failed != 4 || res.Errors["timeout"] != 4 || res.Rejected != 0 || len(res.Reasons) != 0 {
		t.Errorf("sent %d: failed %d, errors %v, rejected %d, reasons %v; want every one a failed timeout",
			res.Sent, res.Failed, res.Errors, res.Rejected, res.Reasons)
	}
}

// TestRunHostHeader: a Host given in Header (sluice load -H 'Host: ...')
// is the Host the server sees, for each client's requests. net/http sends
// req.Host, and ignored the field.
func TestRunHostHeader(t *testing.T) {
	for _, via := range []string{ViaAddr, ViaXFF} {
		var mu sync.Mutex
		hosts := map[string]int{}
		url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hosts[r.Host]++
			mu.Unlock()
		}))
		res, err := Run(context.Background(), Config{URL: url, Header: http.Header{"Host": {"vhost.example"}},
			Load: sim.Load{Rate: 20}, Duration: 200 * time.Millisecond, Clients: 2, ClientsVia: via})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if res.OK != 4 || len(hosts) != 1 || hosts["vhost.example"] != 4 {
			t.Errorf("via %s: %d 2xx, hosts seen %v; want 4 for vhost.example", via, res.OK, hosts)
		}
		mu.Unlock()
	}
}

// TestRunLongestTimeout: a Timeout as long as a time.Duration goes waits
// for the answers. The final wait, Timeout plus a second, wrapped negative
// and cancelled them as the schedule ended.
func TestRunLongestTimeout(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(200 * time.Millisecond) }))
	res, err := Run(context.Background(), Config{URL: url, Load: sim.Load{Rate: 20, Timeout: math.MaxInt64}, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 2 || res.OK != 2 || res.Unfinished != 0 {
		t.Errorf("sent %d: %d 2xx, %d unfinished; want every one answered", res.Sent, res.OK, res.Unfinished)
	}
}

// TestRunInterruptedRates: the rates of a run stopped mid-schedule are per
// second of the part of the schedule it ran, up to where it stopped, and
// so is the series: a run of 100/s stopped after a tenth of a second
// offered 100/s, not 10 requests over the minute it was to last.
func TestRunInterruptedRates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if n.Add(1) == 10 {
			cancel()
		}
	}))
	res, err := Run(ctx, Config{URL: url, Load: sim.Load{Rate: 100}, Duration: time.Minute, Interval: 50 * time.Millisecond})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
		t.Fatalf("err %v; want context.Canceled and Interrupted", err)
	}
	// Constant arrivals every 10 ms from 0: the schedule stopped at the
	// first send it did not plan.
	if want := time.Duration(res.Planned) * 10 * time.Millisecond; res.Planned < 10 || res.Stopped != want {
		t.Fatalf("planned %d, stopped at %v; want at least 10 planned and stopped at %v", res.Planned, res.Stopped, want)
	}
	window := res.Stopped.Seconds()
	if math.Abs(res.Offered-100) > 1e-9 || res.Goodput != float64(res.Good)/window {
		t.Errorf("offered %v/s, goodput %v/s (%d good); want 100/s and %v/s: over the %v the schedule ran",
			res.Offered, res.Goodput, res.Good, float64(res.Good)/window, res.Stopped)
	}
	if want := int((res.Stopped + 50*time.Millisecond - 1) / (50 * time.Millisecond)); len(res.Series) != want {
		t.Fatalf("%d points; want %d, up to %v", len(res.Series), want, res.Stopped)
	}
	for i, p := range res.Series {
		if math.Abs(p.Offered-100) > 1e-9 {
			t.Errorf("point %d: offered %v/s, want 100/s", i, p.Offered)
		}
	}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil || !strings.Contains(text.String(), "INTERRUPTED at "+res.Stopped.String()) {
		t.Errorf("summary does not say where the run stopped (%v):\n%s", err, text.String())
	}
}

// TestRunStoppedBeforeStart: a context ended before the first send is the
// caller's stop, not an unreachable target: the probe's dial, cancelled,
// was reported as load.ErrUnreachable of a target that was listening.
func TestRunStoppedBeforeStart(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Config{URL: url, Load: sim.Load{Rate: 10}, Duration: time.Second})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Errorf("err = %v, want context.Canceled and not ErrUnreachable", err)
	}
}

// TestTimeScaleChecksAfter: the bounds hold after -timescale as before
// it. They were checked only before: a 1 s run at 1e-300 lasted 0 s, 1e6/s
// at 1e-3 offered 1e9/s for 10 ms and took 12 s, and both exited 0.
func TestTimeScaleChecksAfter(t *testing.T) {
	base := Config{URL: "http://127.0.0.1:1/", Duration: 10 * time.Second, Load: sim.Load{Rate: 10}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the message; the field is always timescale
	}{
		{"duration to 0", func(c *Config) { c.Duration, c.TimeScale = time.Second, 1e-300 }, "scales duration from 1s to 0s, which must be > 0"},
		{"rate", func(c *Config) { c.Rate, c.TimeScale = 1e6, 1e-3 }, "scales load.rate from 1e+06 to 1e+09, which must be at most 1e+06/s"},
		{"a day", func(c *Config) { c.Duration, c.TimeScale = 24*time.Hour, 1e-6 }, "scales load.rate from 10 to 1e+07"},
		{"step rate", func(c *Config) { c.Steps, c.TimeScale = []sim.Step{{At: 5 * time.Second, Rate: 5000}}, 1e-3 }, "scales load.steps[0].rate from 5000 to 5e+06"},
		{"steps together", func(c *Config) {
			c.Steps, c.TimeScale = []sim.Step{{At: 1, Rate: 1}, {At: 2, Rate: 1}}, 0.1
		}, "scales load.steps[0].at from 1ns to 0s, which must be after 0"},
		{"timeout to none", func(c *Config) { c.Timeout, c.TimeScale = time.Nanosecond, 0.5 }, "scales load.timeout from 1ns to 0s, which must be > 0"},
		{"bursts every", func(c *Config) {
			c.Bursts, c.TimeScale = sim.Bursts{Size: 1000, Count: 3, Every: time.Second}, 1e-4
		}, "scales load.bursts.every from 1s to 100µs, which must leave the bursts' rate (1000 requests each every) at most 1e+06/s, not 1e+07/s"},
	} {
		c := base
		tc.edit(&c)
		_, err := c.validate()
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) || ce.Field != "timescale" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want timescale: %q", tc.name, err, tc.want)
		}
	}
	// Unscaled, bursts back to back past MaxRate are refused too.
	c := base
	c.Bursts = sim.Bursts{Size: 1000, Count: 3, Every: time.Microsecond}
	if _, err := c.validate(); err == nil || !strings.Contains(err.Error(), "load.bursts.every = 1µs") {
		t.Errorf("bursts of 1000 every 1µs: %v", err)
	}
}
