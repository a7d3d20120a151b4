package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// sharedConfig is a proxy whose per-client quota (header X-Client) lives
// in the store "shared": 10 requests, refilled at one per 100 s, so that
// a test's few seconds add nothing to it. REDIS, FAILURE and UPSTREAM
// are replaced. The breaker's cooldown is long so that no probe reaches a
// dead Redis during a test; the timeout is generous for a loaded box.
const sharedConfig = `reload: {poll: 0s}
stores:
  - name: shared
    url: REDIS
    timeout: 200ms
    failure: FAILURE
    breaker_threshold: 2
    breaker_cooldown: 1m
routes:
  - name: api
    upstream: UPSTREAM
    policy: quota
policies:
  - name: quota
    key: header:X-Client
    store: shared
    rate: {rate: 0.01, burst: 10, per_key: true}
`

func sharedText(redisURL, failure string) string {
	return strings.NewReplacer("REDIS", redisURL, "FAILURE", failure).Replace(sharedConfig)
}

func startRedis(t *testing.T) *redistest.Server {
	t.Helper()
	r, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func okUpstream(t *testing.T) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
}

func clientReq(t *testing.T, url, who string) *http.Request {
	req := newReq(t, "GET", url+"/")
	req.Header.Set("X-Client", who)
	return req
}

// Two proxies sharing one per-key bucket through Redis admit the shared
// quota between them, not twice it; another client has its own quota.
func TestStoreTwoProxiesShareOneQuota(t *testing.T) {
	r := startRedis(t)
	up := okUpstream(t)
	a := start(t, sharedText(r.URL(), "closed"), up)
	b := start(t, sharedText(r.URL(), "closed"), up)
	c := client(t)
	admitted := map[int]int{}
	for i := range 40 { // alternately through a and b
		p := a
		if i%2 == 1 {
			p = b
		}
		resp, _ := get(t, c, clientReq(t, p.url, "alice"))
		admitted[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if admitted[200] != 10 || admitted[429] != 30 {
		t.Fatalf("alice through two proxies: %v, want 10 admitted (the shared burst) and 30 refused", admitted)
	}
	resp, _ := get(t, c, clientReq(t, b.url, "bob"))
	if resp.StatusCode != 200 {
		t.Fatalf("bob, a new key: %d, want 200", resp.StatusCode)
	}
	// The key docs/proxy.md names, with a TTL (idle keys vanish).
	rc := a.s.cur.Load().store("shared").s.Client()
	if ttl, err := rc.PTTL(t.Context(), "sluice:proxy:quota:{alice}").Result(); err != nil || ttl <= 0 {
		t.Errorf("key sluice:proxy:quota:{alice}: TTL %v, %v", ttl, err)
	}
	// Each proxy counted what it decided, and both reached Redis.
	if a.s.cur.Load().policies["quota"].sharedRate.Stats().Admitted+b.s.cur.Load().policies["quota"].sharedRate.Stats().Admitted != 11 {
		t.Errorf("the proxies' admitted counts do not add up to 11")
	}
}

// Redis killed: the failure policy answers (closed: 503 naming the store;
// open: admitted), and once the breaker is open the decisions no longer go
// to Redis. The store's series say so on /metrics.
func TestStoreRedisKilled(t *testing.T) {
	for _, tc := range []struct {
		failure string
		paused  bool // SIGSTOP: Redis holds its sockets and answers nothing
		code    int
		body    string
	}{
		{"closed", false, http.StatusServiceUnavailable, "shared limit store did not answer"},
		{"open", false, http.StatusOK, "ok"},
		{"closed", true, http.StatusServiceUnavailable, "shared limit store did not answer"},
	} {
		name := tc.failure
		if tc.paused {
			name += "/paused"
		}
		t.Run(name, func(t *testing.T) {
			r := startRedis(t)
			p := start(t, sharedText(r.URL(), tc.failure), okUpstream(t))
			c := client(t)
			if resp, _ := get(t, c, clientReq(t, p.url, "alice")); resp.StatusCode != 200 {
				t.Fatalf("with Redis up: %d", resp.StatusCode)
			}
			if tc.paused {
				if err := r.Pause(); err != nil {
					t.Fatal(err)
				}
				defer r.Resume()
			} else {
				r.Kill()
			}
			const n = 20
			for i := range n {
				resp, body := get(t, c, clientReq(t, p.url, "alice"))
				if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
					t.Fatalf("request %d with Redis dead: %d %q, want %d %q", i, resp.StatusCode, body, tc.code, tc.body)
				}
			}
			fams := scrape(t, p)
			calls := value(t, fams, "sluice_store_calls_total", "store", "shared")
			shorted := value(t, fams, "sluice_store_breaker_rejects_total", "store", "shared")
			// One call with Redis up, then breaker_threshold (2) failed
			// calls open the breaker: the other decisions never wait on
			// Redis.
			if calls != 3 || shorted != n-2 {
				t.Errorf("calls %v and breaker rejects %v, want 3 and %d", calls, shorted, n-2)
			}
			// One request at a time: each call went to Redis alone, and
			// one node refuses no merged call with CROSSSLOT.
			if rt := value(t, fams, "sluice_store_round_trips_total", "store", "shared"); rt != calls {
				t.Errorf("round trips %v, want one per call (%v)", rt, calls)
			}
			if cs := value(t, fams, "sluice_store_cross_slot_total", "store", "shared"); cs != 0 {
				t.Errorf("CROSSSLOT refusals %v from one node", cs)
			}
			if s := value(t, fams, "sluice_store_breaker_state", "store", "shared"); s != float64(redisstore.BreakerOpen) {
				t.Errorf("breaker state %v, want %d (open)", s, redisstore.BreakerOpen)
			}
			if e := value(t, fams, "sluice_store_errors_total", "store", "shared"); e != 2 {
				t.Errorf("errors %v, want 2", e)
			}
			// A paused Redis costs the two calls their timeout; a dead
			// one refuses the connection at once.
			if to := value(t, fams, "sluice_store_timeouts_total", "store", "shared"); tc.paused && to != 2 {
				t.Errorf("timeouts %v, want 2", to)
			}
			if f := value(t, fams, "sluice_store_fallbacks_total", "limiter", "quota/per_key_rate"); f != n {
				t.Errorf("fallbacks %v, want %d", f, n)
			}
			h := family(t, fams, "sluice_store_round_trip_seconds").Metric[0].GetHistogram()
			if h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 || len(h.Bucket) < 10 {
				t.Errorf("round-trip histogram: %d samples, sum %v, %d buckets; want the 3 calls", h.GetSampleCount(), h.GetSampleSum(), len(h.Bucket))
			}
		})
	}
}

// A reload keeps an unchanged store (its client, breaker, counters) and
// the state of the policies in it; a bad store URL is refused with the
// old config serving and the password hidden; a removed store is closed.
func TestStoreReload(t *testing.T) {
	r := startRedis(t)
	up := okUpstream(t)
	text := sharedText(r.URL(), "closed")
	p := start(t, text, up)
	c := client(t)
	for range 10 {
		get(t, c, clientReq(t, p.url, "alice"))
	}
	st0 := p.s.cur.Load()
	store0, pol0 := st0.store("shared"), st0.policies["quota"]

	// An unrelated change: the store and the policy carry on.
	writeConfig(t, p.path, strings.Replace(text, "  - name: api\n", "  - name: api\n    timeout: 20s\n", 1), up)
	if err := p.s.Reload(); err != nil {
		t.Fatal(err)
	}
	st1 := p.s.cur.Load()
	if st1.store("shared") != store0 || st1.policies["quota"] != pol0 {
		t.Fatal("a reload that changed neither rebuilt the store or the policy")
	}
	if resp, _ := get(t, c, clientReq(t, p.url, "alice")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("alice after the reload: %d, want 429 (her quota is spent)", resp.StatusCode)
	}

	// A bad URL: refused, old config serving, no password shown.
	writeConfig(t, p.path, strings.Replace(text, r.URL(), "redis://:sekret@127.0.0.1:notaport", 1), up)
	err := p.s.Reload()
	if err == nil || !errors.Is(err, yamlfile.ErrInvalid) || !strings.Contains(err.Error(), "stores[0].url") || strings.Contains(err.Error(), "sekret") {
		t.Fatalf("bad store URL at reload: %v", err)
	}
	if p.s.cur.Load() != st1 {
		t.Fatal("a refused reload changed the serving state")
	}
	if resp, _ := get(t, c, clientReq(t, p.url, "alice")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("alice after the refused reload: %d, want 429", resp.StatusCode)
	}
	resp, body := get(t, c, newReq(t, "GET", p.admin+"/config"))
	if resp.StatusCode != 200 || strings.Contains(body, "sekret") || !strings.Contains(body, "url: "+r.URL()) {
		t.Fatalf("GET /config: %d\n%s", resp.StatusCode, body)
	}

	// The store removed: closed, and the policy back in memory.
	noStore := strings.Replace(text, "    store: shared\n", "", 1)
	noStore = "drain_timeout: 0s\n" + noStore[strings.Index(noStore, "routes:"):]
	writeConfig(t, p.path, noStore, up)
	if err := p.s.Reload(); err != nil {
		t.Fatal(err)
	}
	// Closed drain_timeout (here 0s) after the reload.
	if !waitFor(10*time.Second, func() bool { return store0.s.Client().Ping(t.Context()).Err() != nil }) {
		t.Fatal("the removed store's client still answers 10 s after the reload")
	}
	if resp, _ := get(t, c, clientReq(t, p.url, "alice")); resp.StatusCode != 200 {
		t.Fatalf("alice with an in-memory bucket: %d, want 200", resp.StatusCode)
	}
}

// A password in the file comes from the environment; a URL with a password
// is redacted in GET /config (checked above) and in errors.
func TestStoreConfigErrors(t *testing.T) {
	t.Setenv("SLUICE_TEST_REDIS_PASSWORD", "sekret")
	base := sharedText("redis://:${SLUICE_TEST_REDIS_PASSWORD}@127.0.0.1:6390/0", "closed")
	base = strings.ReplaceAll(base, "UPSTREAM", "http://127.0.0.1:9000")
	for _, tc := range []struct{ name, edit, want string }{
		{"good", base, ""},
		{"cluster", strings.Replace(base, "redis://", "redis+cluster://", 1), ""},
		{"scheme", strings.Replace(base, "redis://", "http://", 1), "f.yaml:4: stores[0].url"},
		{"unknown store", strings.Replace(base, "store: shared", "store: nope", 1), "f.yaml:16: policies[0].store: \"nope\" is not the name of a store"},
		{"failure", strings.Replace(base, "failure: closed", "failure: maybe", 1), "f.yaml:6: stores[0].failure"},
		{"timeout", strings.Replace(base, "timeout: 200ms", "timeout: 1m", 1), "f.yaml:5: stores[0].timeout"},
		{"local without N", strings.Replace(base, "failure: closed", "failure: local", 1), "stores[0].replicas"},
		{"local with N", strings.Replace(base, "failure: closed", "failure: local\n    replicas: 3", 1), ""},
		{"replicas", strings.Replace(base, "failure: closed", "failure: local\n    replicas: -1", 1), "f.yaml:7: stores[0].replicas"},
		{"heartbeat", strings.Replace(base, "failure: closed", "failure: local\n    heartbeat: 1ms", 1), "f.yaml:7: stores[0].heartbeat"},
		{"duplicate", strings.Replace(base, "routes:", "  - name: shared\n    url: redis://127.0.0.1:1\nroutes:", 1), "f.yaml:9: stores[1].name"},
		{"rate range", strings.Replace(base, "rate: 0.01", "rate: 1e9", 1), "f.yaml:17: policies[0].rate"},
		{"adaptive", strings.Replace(base, "    rate:", "    concurrency: {limit: 5, adaptive: {}}\n    rate:", 1), "policies[0].concurrency.adaptive"},
		{"shared limit", strings.Replace(base, "    rate:", "    concurrency: {limit: 5}\n    rate:", 1), ""},
		{"shared wait services", strings.Replace(base, "    rate:", "    concurrency: {limit: 5, max_wait_services: 4}\n    rate:", 1), "policies[0].concurrency.max_wait_services"},
		{"per key concurrency", strings.Replace(base, "    rate:", "    per_key_concurrency: {limit: 5}\n    rate:", 1), "f.yaml:17: policies[0].per_key_concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("f.yaml", []byte(tc.edit))
			if err == nil {
				err = Check(c)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, yamlfile.ErrInvalid) || strings.Contains(err.Error(), "sekret") {
				t.Errorf("%v: not yamlfile.ErrInvalid, or shows the password", err)
			}
		})
	}
}

func scrape(t *testing.T, p *running) map[string]*dto.MetricFamily {
	t.Helper()
	c := client(t)
	resp, err := c.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func family(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		t.Fatalf("no metric %s", name)
	}
	return f
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name, label, v string) float64 {
	t.Helper()
	for _, m := range family(t, fams, name).Metric {
		if hasLabel(m, label, v) {
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, v)
	return 0
}
