package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	// The effective config is itself a valid config.
	if _, err := ParseConfig("effective.yaml", []byte(body)); err != nil {
		t.Errorf("GET /config does not parse back: %v", err)
	}
}

// Every metric the Grafana dashboard and the docs' Prometheus rules query
// is one the proxy exports.
func TestDashboardMetricsExist(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, adminConfig, up)
	c := client(t)
	get(t, c, newReq(t, "GET", p.url+"/keyed"))
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
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
