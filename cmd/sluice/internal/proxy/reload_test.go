package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Two configs that differ in one policy's limit; the other policy, a token
// bucket that only drains, is the same in both.
const reloadA = `
reload: {poll: 0s}
routes:
  - name: steady
    path_prefix: /steady
    upstream: UPSTREAM
    policy: steady
  - name: changing
    upstream: UPSTREAM
    policy: changing
policies:
  - name: steady
    rate: {rate: 0.001, burst: 1000000}
    concurrency: {limit: 1000}
  - name: changing
    concurrency: {limit: LIMIT, max_queue: 1000, max_wait: 10s}
`

// 1,000 reloads alternating two configs under a steady load: no request
// fails, the unchanged policy is the same object with its tokens spent as
// the requests spent them, the changed one is rebuilt each time.
func TestReloadUnderLoad(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfgA := strings.Replace(reloadA, "LIMIT", "500", 1)
	cfgB := strings.Replace(reloadA, "LIMIT", "400", 1)
	p := start(t, cfgA, up)
	steady := p.s.cur.Load().policies["steady"]

	const workers = 4
	var (
		stop         atomic.Bool
		ok, failed   atomic.Int64
		steadyOK     atomic.Int64
		wg           sync.WaitGroup
		firstFailure atomic.Pointer[string]
	)
	c := client(t)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded in count and time, as every load loop here.
			deadline := time.Now().Add(2 * time.Minute)
			for i := 0; i < 1_000_000 && !stop.Load() && time.Now().Before(deadline); i++ {
				path := "/x"
				if (i+w)%2 == 0 {
					path = "/steady"
				}
				resp, err := c.Get(p.url + path)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					msg := fmt.Sprint(err)
					if err == nil {
						msg = resp.Status
					}
					firstFailure.CompareAndSwap(nil, &msg)
					continue
				}
				ok.Add(1)
				if path == "/steady" {
					steadyOK.Add(1)
				}
			}
		}()
	}
	const reloads = 1000
	for i := range reloads {
		text := cfgB
		if i%2 == 1 {
			text = cfgA
		}
		writeConfig(t, p.path, text, up)
		if err := p.s.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()

	if n := failed.Load(); n != 0 {
		t.Errorf("%d failed requests (first: %s) of %d", n, *firstFailure.Load(), n+ok.Load())
	}
	if ok.Load() < reloads/10 {
		t.Errorf("only %d requests during %d reloads: the load did not overlap the reloads", ok.Load(), reloads)
	}
	st := p.s.cur.Load()
	if st.policies["steady"] != steady {
		t.Errorf("the unchanged policy was rebuilt")
	}
	spent := 1_000_000 - steady.bucket.Tokens()
	if d := spent - float64(steadyOK.Load()); d < -1 || d > 1 { // the bucket refills 0.001/s
		t.Errorf("steady bucket spent %.1f tokens, %d requests went through it: state lost", spent, steadyOK.Load())
	}
	if got := st.policies["changing"].conc.Stats().Limit; got != 500 {
		t.Errorf("changing limit %v after the last reload (config A), want 500", got)
	}
	// The start counts as the first successful load.
	if v := metric(t, p, "sluice_proxy_config_reloads_total", "result", "success"); v != reloads+1 {
		t.Errorf("reloads_total{success} = %v, want %d", v, reloads+1)
	}
	t.Logf("%d requests during %d reloads, 0 failed", ok.Load(), reloads)
}

// A bad config is refused whole: the old one keeps serving, and the error
// shows in the log, the admin API and the metrics.
func TestBadReloadKeepsOldConfig(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	good := strings.Replace(reloadA, "LIMIT", "500", 1)
	p := start(t, good, up)
	before := p.s.cur.Load()
	// Valid YAML, valid keys, one limit out of range: only building the
	// policy finds it, after the other policy was built.
	writeConfig(t, p.path, strings.Replace(reloadA, "LIMIT", "0", 1), up)
	err := p.s.Reload()
	if err == nil || !strings.Contains(err.Error(), "policies[1].concurrency.limit") {
		t.Fatalf("reload: %v, want the limit's error", err)
	}
	if p.s.cur.Load() != before {
		t.Fatal("a refused config replaced the serving one")
	}
	c := client(t)
	if r, _ := get(t, c, newReq(t, "GET", p.url+"/")); r.StatusCode != 200 {
		t.Errorf("after a refused reload: %d", r.StatusCode)
	}
	r, body := get(t, c, newReq(t, "GET", p.admin+"/config"))
	if !strings.Contains(body, "last reload REFUSED") || !strings.Contains(r.Header.Get("Sluice-Reload-Error"), "policies[1].concurrency.limit") {
		t.Errorf("GET /config does not show the refusal:\n%s", body)
	}
	if v := metric(t, p, "sluice_proxy_config_last_reload_successful", "", ""); v != 0 {
		t.Errorf("last_reload_successful = %v, want 0", v)
	}
	if v := metric(t, p, "sluice_proxy_config_reloads_total", "result", "failure"); v != 1 {
		t.Errorf("reloads_total{failure} = %v, want 1", v)
	}
	// Fixing the file is picked up by the poller.
	writeConfig(t, p.path, good, up)
	if err := p.s.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := metric(t, p, "sluice_proxy_config_last_reload_successful", "", ""); v != 1 {
		t.Errorf("last_reload_successful = %v after a good reload, want 1", v)
	}
}

// The poller reloads a changed file.
func TestWatchReloadsChangedFile(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, strings.Replace(reloadA, "LIMIT", "500", 1), up)
	p.s.mu.Lock()
	p.s.cur.Load().cfg.Reload.Poll = 10 * time.Millisecond
	p.s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.s.Watch(ctx) }()
	defer func() { cancel(); <-done }()
	writeConfig(t, p.path, strings.Replace(reloadA, "LIMIT", "321", 1)+"\n# changed\n", up)
	if !waitFor(10*time.Second, func() bool { return p.s.cur.Load().policies["changing"].conc.Stats().Limit == 321 }) {
		t.Fatal("the changed file was not reloaded within 10 s")
	}
}

// A reload that changes reload.poll applies it, as it applies the rest of
// the file: from 0s (Watch waiting) or from an hour to 100ms, the next
// change of the file is reloaded by the poller.
func TestWatchAppliesChangedPoll(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	config := func(poll, route string) string {
		return "reload: {poll: " + poll + "}\nroutes:\n  - {name: " + route + ", upstream: UPSTREAM}\n"
	}
	for _, from := range []string{"0s", "1h"} {
		t.Run("from="+from, func(t *testing.T) {
			p := start(t, config(from, "a"), up)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.s.Watch(ctx) }()
			defer func() { cancel(); <-done }()
			writeConfig(t, p.path, config("100ms", "bb"), up)
			if err := p.s.Reload(); err != nil { // SIGHUP
				t.Fatal(err)
			}
			writeConfig(t, p.path, config("100ms", "ccc"), up)
			if !waitFor(10*time.Second, func() bool { return p.s.Config().Routes[0].Name == "ccc" }) {
				t.Errorf("reload.poll changed from %s to 100ms by a reload: the file changed since was not reloaded within 10 s", from)
			}
		})
	}
}

// metric scrapes the admin API, parses the exposition with the Prometheus
// libraries and returns the value of name (with label=value, if given).
func metric(t *testing.T, p *running, name, label, value string) float64 {
	t.Helper()
	fams := scrape(t, p)
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.Metric {
		if label == "" || hasLabel(m, label, value) {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// A config whose build fails leaves no series of the routes it had built
// so far: /metrics shows the routes that serve.
func TestRefusedBuildLeavesNoSeries(t *testing.T) {
	cfg, err := ParseConfig("f.yaml", []byte(`
routes:
  - {name: new, path_prefix: /new, upstream: "http://127.0.0.1:1"}
  - {name: bad, upstream: "http://127.0.0.1:1", policy: q}
policies:
  - {name: q, rate: {rate: 1, burst: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	// A name validation refuses, given after it, so that the build
	// fails, at the second route (httplimit refuses a quote in the
	// RateLimit-Policy name), once the first is built.
	cfg.Policies[0].Name, cfg.Routes[1].Policy = `q"`, `q"`
	m := newMetrics(func() *state { return nil })
	if _, err := build(cfg, nil, &transports{}, m, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("the build did not fail")
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if hasLabel(s, "route", "new") {
				t.Errorf("%s{route=\"new\"} after a refused build", f.GetName())
			}
		}
	}
}
