package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rate"
)

const adminConfig = `
routes:
  - name: api
    upstream: UPSTREAM
    policy: api
  - name: keyed
    path_prefix: /keyed
    upstream: UPSTREAM
    policy: per-client
policies:
  - name: api
    rate: {rate: 100, burst: 50}
    concurrency: {limit: 8, max_queue: 4, discipline: codel}
  - name: per-client
    rate: {rate: 5, burst: 5, per_key: true}
    per_key_concurrency: {limit: 2}
`

func put(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("PUT", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestAdminLimits(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, adminConfig, up)
	c := client(t)
	get(t, c, newReq(t, "GET", p.url+"/keyed"))

	_, body := get(t, c, newReq(t, "GET", p.admin+"/limits"))
	var views []limitsView
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(views) != 2 || views[0].Concurrency.Limit != 8 || views[0].Rate.Limit != 100 || views[1].PerKeyRate.Keys != 1 {
		t.Errorf("GET /limits:\n%s", body)
	}

	pol := p.s.cur.Load().policies["api"]
	for _, tc := range []struct {
		name, path, body string
		code             int
		field            string
	}{
		{"limit range", "/limits/api", `{"limit": 0}`, 400, "limit"},
		{"rate range, limit fine", "/limits/api", `{"limit": 20, "rate": -1}`, 400, "rate"},
		{"unknown field", "/limits/api", `{"limt": 20}`, 400, "limt"},
		{"wrong type", "/limits/api", `{"limit": "20"}`, 400, "limit"},
		{"not json", "/limits/api", `limit=20`, 400, ""},
		{"empty", "/limits/api", `{}`, 400, "body"},
		{"no global bucket", "/limits/per-client", `{"rate": 10}`, 400, "rate"},
		{"no such policy", "/limits/nope", `{"limit": 3}`, 404, ""},
		// The bucket could not count a refill that takes longer than
		// rate.MaxFill: checked with the other field as it stands.
		{"burst too long to fill", "/limits/api", `{"burst": 200000000000}`, 400, "burst"},
		{"rate too slow to fill", "/limits/api", `{"rate": 1e-300}`, 400, "rate"},
		// One object: what follows it must not leave the first applied.
		{"two values", "/limits/api", `{"limit": 7} {"limit": "oops"}`, 400, "body"},
		{"trailing garbage", "/limits/api", `{"limit": 7} garbage`, 400, "body"},
		// Refused whole, not cut at 64 KiB: what follows the cut
		// must not be let through unread.
		{"over 64 KiB", "/limits/api", `{"limit": 7}` + strings.Repeat(" ", 1<<16) + `{"limit": 1}`, 413, "body"},
		// 64 KiB is fine (and sets the limit it has).
		{"64 KiB", "/limits/api", `{"limit": 8}` + strings.Repeat(" ", 1<<16-len(`{"limit": 8}`)), 200, ""},
	} {
		code, out := put(t, p.admin+tc.path, tc.body)
		if code != tc.code || (tc.field != "" && out["field"] != tc.field) {
			t.Errorf("%s: %d %v, want %d naming %q", tc.name, code, out, tc.code, tc.field)
		}
	}
	if l, cfg := pol.conc.Stats().Limit, pol.bucket.Config(); l != 8 || cfg.Rate != 100 || cfg.Burst != 50 {
		t.Fatalf("refused changes changed the limits: limit %v rate %v burst %d", l, cfg.Rate, cfg.Burst)
	}
	if code, out := put(t, p.admin+"/limits/api", `{"limit": 20, "rate": 7, "burst": 9}`); code != 200 {
		t.Fatalf("good change: %d %v", code, out)
	}
	if l, cfg := pol.conc.Stats().Limit, pol.bucket.Config(); l != 20 || cfg.Rate != 7 || cfg.Burst != 9 {
		t.Errorf("after PUT: limit %v, rate %v, burst %d", l, cfg.Rate, cfg.Burst)
	}
	// The RateLimit-Policy field describes the bucket as it is now: 9 at
	// once, full again after ceil(9/7) = 2 s; and still after a reload
	// that keeps the policy, which builds the routes anew.
	for _, when := range []string{"after PUT", "after a reload"} {
		resp, _ := get(t, c, newReq(t, "GET", p.url+"/"))
		if got := resp.Header.Get("RateLimit-Policy"); got != `"api";q=9;w=2` {
			t.Errorf("%s: RateLimit-Policy %q, want %q", when, got, `"api";q=9;w=2`)
		}
		// A new timeout on the api route: the route is built anew, the
		// policy kept.
		writeConfig(t, p.path, strings.Replace(adminConfig, "policy: api\n", "policy: api\n    timeout: 9s\n", 1), up)
		if err := p.s.Reload(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdminMetricsHealth(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, adminConfig, up)
	c := client(t)
	get(t, c, newReq(t, "GET", p.url+"/"))
	get(t, c, newReq(t, "GET", p.url+"/keyed"))
	if v := metric(t, p, "sluice_proxy_requests_total", "route", "api"); v != 1 {
		t.Errorf("requests_total{route=api} = %v", v)
	}
	if v := metric(t, p, "sluice_admitted_total", "limiter", "api/concurrency"); v != 1 {
		t.Errorf("sluice_admitted_total{limiter=api/concurrency} = %v", v)
	}
	if v := metric(t, p, "sluice_limit", "limiter", "api/rate"); v != 100 {
		t.Errorf("sluice_limit{limiter=api/rate} = %v", v)
	}
	if v := metric(t, p, "sluice_proxy_admission_total", "result", "admitted"); v != 1 {
		t.Errorf("sluice_proxy_admission_total{result=admitted} = %v", v)
	}
	if v := metric(t, p, "go_goroutines", "", ""); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r, _ := get(t, c, newReq(t, "GET", p.admin+path)); r.StatusCode != 200 {
			t.Errorf("%s: %d", path, r.StatusCode)
		}
	}
	r, body := get(t, c, newReq(t, "GET", p.admin+"/config"))
	if r.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(body, "discipline: codel") {
		t.Errorf("GET /config:\n%s", body)
	}
	// The effective config is itself a valid config, the policy without a
	// concurrency limit included: its absent sections are left out, not
	// written "concurrency: null", which a file reads as present.
	if cfg, err := ParseConfig("effective.yaml", []byte(body)); err != nil {
		t.Errorf("GET /config does not parse back: %v", err)
	} else if err := Check(cfg); err != nil {
		t.Errorf("GET /config does not build: %v\n%s", err, body)
	}
}

// Every metric the Grafana dashboard and the docs' Prometheus rules query
// is one the proxy exports.
func TestDashboardMetricsExist(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, adminConfig, up)
	c := client(t)
	get(t, c, newReq(t, "GET", p.url+"/keyed"))
	fams := scrape(t, p)
	names := regexp.MustCompile(`\b(?:sluice|go)_[a-z_]+`)
	for _, f := range []string{"../../../../docs/grafana/sluice-proxy.json", "../../../../docs/prometheus/prometheus.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, n := range names.FindAllString(string(b), -1) {
			if fams[n] == nil && fams[strings.TrimSuffix(n, "_bucket")] == nil {
				t.Errorf("%s queries %s, which /metrics does not export", f, n)
			}
			seen++
		}
		if seen == 0 {
			t.Errorf("%s names no metric", f)
		}
	}
}

// signalRead is a request body that closes read at its first Read.
type signalRead struct {
	io.ReadCloser
	once *sync.Once
	read chan struct{}
}

func (b signalRead) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.read) })
	return b.ReadCloser.Read(p)
}

// A PUT /limits whose body never comes holds nothing: a reload, GET
// /config and Shutdown go ahead while its handler waits for the body.
func TestAdminStalledPutHoldsNothing(t *testing.T) {
	up := upstream(t, echo("a"))
	read := make(chan struct{})
	p := startWith(t, `
reload: {poll: 0s}
routes:
  - {name: r, upstream: UPSTREAM, policy: c}
policies:
  - {name: c, concurrency: {limit: 5}}
`, up, slog.New(slog.DiscardHandler), func(s *Server) {
		if s.admin.ReadHeaderTimeout <= 0 || s.admin.ReadTimeout <= 0 {
			t.Errorf("admin server: read header timeout %v, read timeout %v: a stalled client holds its connection for ever",
				s.admin.ReadHeaderTimeout, s.admin.ReadTimeout)
		}
		h := s.admin.Handler
		once := &sync.Once{}
		s.admin.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "PUT" {
				r.Body = signalRead{r.Body, once, read}
			}
			h.ServeHTTP(w, r)
		})
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	// Closed before the cleanup's Shutdown waits: on the old code it is
	// what lets the handler give mu back.
	defer conn.Close()
	if _, err := io.WriteString(conn, "PUT /limits/c HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-read: // the handler waits for the rest of the body
	case <-time.After(10 * time.Second):
		t.Fatal("the PUT's body was never read")
	}

	within := func(what string, d time.Duration, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(d):
			t.Errorf("%s still blocked after %v behind a PUT whose body does not come", what, d)
			conn.Close()
			<-done
		}
	}
	within("Reload", 5*time.Second, p.s.Reload)
	within("GET /config", 5*time.Second, func() error {
		resp, err := client(t).Get(p.admin + "/config")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	within("Shutdown", 5*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.s.Shutdown(ctx)
	})
	if got := p.s.cur.Load().policies["c"].conc.Stats().Limit; got != 5 {
		t.Errorf("limit %v after a PUT whose body never came, want 5", got)
	}
}

// A PUT that changes the rate and the burst together applies both or
// neither, whichever of the two alone the bucket would refuse against the
// other field as it stands: cutting the rate of a deep bucket while
// shrinking it, and raising both back.
func TestAdminPutRateAndBurstTogether(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, `
reload: {poll: 0s}
routes:
  - {name: r, upstream: UPSTREAM, policy: q}
policies:
  - name: q
    rate: {rate: 1, burst: 1000000}
    concurrency: {limit: 5}
`, up)
	pol := p.s.cur.Load().policies["q"]
	c := client(t)
	for _, tc := range []struct {
		body   string
		code   int
		rate   float64
		burst  int
		limit  float64
		policy string // RateLimit-Policy after it
	}{
		// At the old burst, 1e6, the new rate alone would take 3e4
		// years to fill the bucket.
		{`{"rate": 0.000001, "burst": 1, "limit": 3}`, 200, 0.000001, 1, 3, `"q";q=1;w=1000000`},
		// At the old rate the new burst alone would.
		{`{"rate": 1, "burst": 1000000, "limit": 5}`, 200, 1, 1000000, 5, `"q";q=1000000;w=1000000`},
		// Refused whole: the limit is not changed either.
		{`{"rate": 0.000001, "limit": 2}`, 400, 1, 1000000, 5, `"q";q=1000000;w=1000000`},
	} {
		code, out := put(t, p.admin+"/limits/q", tc.body)
		cfg := pol.bucket.Config()
		if code != tc.code || cfg.Rate != tc.rate || cfg.Burst != tc.burst || pol.conc.Stats().Limit != tc.limit {
			t.Errorf("PUT %s: %d %v, then rate %v burst %d limit %v; want %d, rate %v burst %d limit %v",
				tc.body, code, out, cfg.Rate, cfg.Burst, pol.conc.Stats().Limit, tc.code, tc.rate, tc.burst, tc.limit)
		}
		resp, _ := get(t, c, newReq(t, "GET", p.url+"/"))
		if got := resp.Header.Get("RateLimit-Policy"); got != tc.policy {
			t.Errorf("PUT %s: RateLimit-Policy %q, want %q", tc.body, got, tc.policy)
		}
	}
}

// A PUT of the rate and the burst changes both in one step: a request at
// any moment sees the bucket as it was or as it is asked to be, never the
// new rate with the old burst. (Set one after the other, the two fields
// left a window, between the setters, where the bucket was (20, 20): a
// bucket no one had configured.)
func TestAdminPutRateAndBurstIsOneStep(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, `
reload: {poll: 0s}
routes:
  - {name: r, upstream: UPSTREAM, policy: q}
policies:
  - name: q
    rate: {rate: 10, burst: 20}
`, up)
	pol := p.s.cur.Load().policies["q"]
	admin := p.s.adminHandler()
	var stop atomic.Bool
	var seen atomic.Pointer[rate.Config]
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() && seen.Load() == nil {
			pol.bucket.Allow()
			if c := pol.bucket.Config(); c != (rate.Config{Rate: 10, Burst: 20}) && c != (rate.Config{Rate: 20, Burst: 10}) {
				seen.Store(&c)
			}
		}
	})
	for i := range 5000 {
		body := `{"rate": 20, "burst": 10}`
		if i%2 == 1 {
			body = `{"rate": 10, "burst": 20}`
		}
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest("PUT", "/limits/q", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", body, rec.Code, rec.Body)
		}
		if seen.Load() != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if c := seen.Load(); c != nil {
		t.Errorf("a request saw the bucket at rate %v burst %d, half of a change", c.Rate, c.Burst)
	}
}
