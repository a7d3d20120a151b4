package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
)

const goodConfig = `listen: 127.0.0.1:8080
client_ip:
  trusted_proxies: [10.0.0.0/8, 192.0.2.1]
routes:
  - name: api
    path_prefix: /api/
    upstream: http://127.0.0.1:9000
    policy: api
  - name: rest
    upstream: http://127.0.0.1:9000
policies:
  - name: api
    rate: {rate: 10, burst: 20, per_key: true}
    concurrency:
      limit: 10
      max_queue: 20
      discipline: adaptive_lifo
      adaptive: {}
`

func TestGoodConfigDefaults(t *testing.T) {
	c, err := ParseConfig("f.yaml", []byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(c); err != nil {
		t.Fatal(err)
	}
	if c.Admin.Listen != DefaultAdminListen || c.DrainTimeout != DefaultDrainTimeout || c.Routes[1].PathPrefix != "/" ||
		c.Policies[0].Key != "client_ip" || c.Policies[0].Concurrency.Adaptive.Algorithm != RecommendedAlgorithm ||
		c.Routes[0].Timeout != DefaultTimeout || c.Policies[0].QuotaStatus != 429 {
		t.Errorf("defaults not filled in: %+v", c)
	}
}

// Every bad input is an error naming file, line and field.
func TestBadConfigNamesFileLineField(t *testing.T) {
	t.Setenv("SLUICE_TEST_SET", "http://127.0.0.1:1")
	for _, tc := range []struct {
		name, edit, want string
	}{
		{"unknown key", "listen: 127.0.0.1:8080\nlistne: x\n", "f.yaml:2: listne: unknown key"},
		{"syntax", "routes: [\n", "f.yaml:1: YAML syntax"},
		{"upstream", strings.Replace(goodConfig, "upstream: http://127.0.0.1:9000\n    policy", "upstream: \"http://[::1\"\n    policy", 1), "f.yaml:7: routes[0].upstream"},
		{"upstream without a scheme", strings.Replace(goodConfig, "http://127.0.0.1:9000\n    policy", "127.0.0.1:9000\n    policy", 1), `f.yaml:7: routes[0].upstream: "127.0.0.1:9000": want an http:// or https:// URL, like http://127.0.0.1:9000`},
		{"upstream scheme", strings.Replace(goodConfig, "http://127.0.0.1:9000\npolicies", "ftp://x\npolicies", 1), "f.yaml:10: routes[1].upstream"},
		{"duplicate route", strings.Replace(goodConfig, "name: rest", "name: api", 1), "f.yaml:9: routes[1].name: \"api\" already names routes[0]"},
		{"cidr", strings.Replace(goodConfig, "192.0.2.1", "192.0.2.300/8", 1), "f.yaml:3: client_ip.trusted_proxies[1]"},
		{"unknown policy", strings.Replace(goodConfig, "policy: api", "policy: nope", 1), "f.yaml:8: routes[0].policy"},
		{"burst", strings.Replace(goodConfig, "burst: 20", "burst: 0", 1), "f.yaml:13: policies[0].rate.burst"},
		{"limit", strings.Replace(goodConfig, "      adaptive: {}\n", "", 1) + "", ""},
		{"limit range", strings.Replace(strings.Replace(goodConfig, "      adaptive: {}\n", "", 1), "limit: 10", "limit: 0", 1), "f.yaml:15: policies[0].concurrency.limit"},
		{"discipline", strings.Replace(goodConfig, "adaptive_lifo", "random", 1), "f.yaml:17: policies[0].concurrency.discipline"},
		{"deadline header", strings.Replace(goodConfig, "    policy: api\n", "    policy: api\n    deadline_header: \"X Timeout\"\n", 1), "f.yaml:9: routes[0].deadline_header"},
		{"deadline header, no policy", strings.Replace(goodConfig, "  - name: rest\n", "  - name: rest\n    deadline_header: X-Timeout\n", 1), "f.yaml:10: routes[1].deadline_header"},
		{"wait services", strings.Replace(goodConfig, "max_queue: 20", "max_queue: 20\n      max_wait_services: 4", 1), ""},
		{"wait services range", strings.Replace(goodConfig, "max_queue: 20", "max_queue: 20\n      max_wait_services: -1", 1), "f.yaml:17: policies[0].concurrency.max_wait_services: must be a finite number >= 0 (0: none), got -1"},
		{"algorithm", strings.Replace(goodConfig, "adaptive: {}", "adaptive: {algorithm: magic}", 1), "policies[0].concurrency.adaptive.algorithm"},
		{"env unset", strings.Replace(goodConfig, "http://127.0.0.1:9000\n    policy", "${SLUICE_TEST_UNSET}\n    policy", 1), "f.yaml:7: routes[0].upstream: environment variable SLUICE_TEST_UNSET is not set"},
		{"env set", strings.Replace(goodConfig, "http://127.0.0.1:9000\n    policy", "${SLUICE_TEST_SET}\n    policy", 1), ""},
		{"duration unit", "drain_timeout: 30\n", "f.yaml:1: drain_timeout: \"30\" has no unit"},
		{"method", strings.Replace(goodConfig, "path_prefix: /api/", "methods: [get]", 1), "f.yaml:6: routes[0].methods[0]"},
		{"no limit", strings.Replace(goodConfig, "    rate: {rate: 10, burst: 20, per_key: true}\n    concurrency:\n      limit: 10\n      max_queue: 20\n      discipline: adaptive_lifo\n      adaptive: {}\n", "", 1), "f.yaml:12: policies[0]: sets no limit"},
		{"no routes", "listen: :8080\n", "routes: no routes"},
		{"header key", strings.Replace(goodConfig, "    rate:", "    key: \"header:\"\n    rate:", 1), "f.yaml:13: policies[0].key"},
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
			if !errors.Is(err, yamlfile.ErrInvalid) {
				t.Errorf("%v does not match yamlfile.ErrInvalid", err)
			}
		})
	}
}

// A library's own range check comes back at the field, still matching
// sluice.ErrInvalidConfig.
func TestLibraryConfigErrorIsWrapped(t *testing.T) {
	bad := strings.Replace(goodConfig, "adaptive: {}", "adaptive: {min_limit: 50, max_limit: 10}", 1)
	c, err := ParseConfig("f.yaml", []byte(bad))
	if err == nil {
		err = Check(c)
	}
	if err == nil || !strings.Contains(err.Error(), "f.yaml:18: policies[0].concurrency.adaptive") || !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
}

// A library's error on a field the file wrote is reported at that key, in
// the file's words: not at the parent's line with the Go field name.
func TestLibraryConfigErrorAtTheKey(t *testing.T) {
	bad := strings.Replace(goodConfig, "max_queue: 20", "max_queue: -1", 1)
	c, err := ParseConfig("f.yaml", []byte(bad))
	if err == nil {
		err = Check(c)
	}
	want := "f.yaml:16: policies[0].concurrency.max_queue: must be 0 (no queue) to 16777215, got -1"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Config.MaxQueue") || !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// No config file, however broken, panics the parser or the build, and
// every one that fails says where: a *yamlfile.Error.
func FuzzConfig(f *testing.F) {
	f.Add(goodConfig)
	f.Add(strings.Replace(goodConfig, "adaptive: {}", "adaptive: {algorithm: little, initial_limit: 5, max_limit: 3}", 1))
	f.Add(strings.Replace(goodConfig, "    rate:", "    key: \"header:X-Key\"\n    max_keys: 2\n    rate:", 1))
	f.Add("listen: :8080\nroutes: [{upstream: 'http://127.0.0.1:1', timeout: 1ms}]\n")
	f.Fuzz(func(t *testing.T, data string) {
		c, err := ParseConfig("f.yaml", []byte(data))
		if err == nil {
			err = Check(c)
		}
		if err != nil && !errors.Is(err, yamlfile.ErrInvalid) {
			t.Fatalf("%v does not match yamlfile.ErrInvalid", err)
		}
	})
}
