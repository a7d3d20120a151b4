package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rate"
)

// checkText parses and checks a config, as `sluice proxy -check` does.
func checkText(text string) error {
	c, err := ParseConfig("f.yaml", []byte(text))
	if err == nil {
		err = Check(c)
	}
	return err
}

// A token bucket that would take longer than rate.MaxFill (2^60 ns, 36.5
// years) to fill is refused at its rate block: the bucket could not count
// its refill (rate 10, burst 2e10 never refilled), and its RateLimit-Policy
// window (burst/rate seconds) would overflow a time.Duration.
func TestRateWindowBounded(t *testing.T) {
	const routes = "routes: [{name: a, upstream: \"http://127.0.0.1:1\", policy: p}]\n"
	for _, tc := range []struct{ rate, want string }{
		{"{rate: 1e-9, burst: 1000000000}", `f.yaml:4: policies[0].rate: burst 1000000000 at rate 1e-09/s`},
		{"{rate: 1, burst: 9223372036854775807}", `f.yaml:4: policies[0].rate: burst 9223372036854775807 at rate 1/s`},
		{"{rate: 10, burst: 20000000000}", `f.yaml:4: policies[0].rate: burst 20000000000 at rate 10/s takes 63.38 years to fill; burst/rate must be at most 36.53 years`},
		{"{rate: 0.001, burst: 1152922, per_key: true}", `f.yaml:4: policies[0].rate: burst 1152922 at rate 0.001/s`},
		{"{rate: 0.001, burst: 1152921}", ""}, // just within 2^60 ns
	} {
		for _, store := range []string{"", "    store: r\n"} {
			text := routes + "policies:\n  - name: p\n    rate: " + tc.rate + "\n" + store
			if store != "" {
				text += "stores: [{name: r, url: \"redis://127.0.0.1:1\"}]\n"
			}
			err := checkText(text)
			if tc.want == "" {
				if err != nil && store == "" {
					t.Errorf("%s: %v", tc.rate, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
				t.Errorf("%s%s: %v, want %q", tc.rate, store, err, tc.want)
			}
		}
	}
}

// reload.poll is off (0s) or at least 100ms: each poll is an os.Stat, and
// 1ns would spin a core.
func TestReloadPollBounded(t *testing.T) {
	const routes = "routes: [{name: a, upstream: \"http://127.0.0.1:1\"}]\n"
	for _, tc := range []struct{ poll, want string }{
		{"1ns", "f.yaml:1: reload.poll: must be 0s (no polling) or at least 100ms, got 1ns"},
		{"99ms", "f.yaml:1: reload.poll: must be 0s (no polling) or at least 100ms, got 99ms"},
		{"-1s", "f.yaml:1: reload.poll: must be 0s (no polling) or at least 100ms, got -1s"},
		{"0s", ""},
		{"100ms", ""},
	} {
		err := checkText("reload: {poll: " + tc.poll + "}\n" + routes)
		if tc.want == "" {
			if err != nil {
				t.Errorf("poll %s: %v", tc.poll, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("poll %s: %v, want %q", tc.poll, err, tc.want)
		}
	}
}

// checkPolicyName takes httplimit's rule for the RateLimit-Policy name and
// refuses spaces and slashes besides (a path segment in the admin API):
// every name it passes builds a route's handler, and it refuses no other
// name httplimit takes.
func TestPolicyNameIsHttplimitsRule(t *testing.T) {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	for c := range 256 {
		name := "a" + string(byte(c)) + "b"
		_, herr := httplimit.New(http.NotFoundHandler(), httplimit.Config{Limiter: b, Policy: &httplimit.RatePolicy{Name: name, Quota: 1, Window: time.Second}})
		want := herr == nil && c != ' ' && c != '/'
		if err := checkPolicyName(name); (err == nil) != want {
			t.Errorf("checkPolicyName(%q) = %v; httplimit.New: %v", name, err, herr)
		}
	}
}

// A policy name a route could not be built with is refused at the name,
// not later at each routes[].policy that names it: printable ASCII
// without spaces, slashes, quotes or backslashes (an admin API path, a
// quoted string in the RateLimit-Policy field).
func TestPolicyNameChecked(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`'caf"e'`, `f.yaml:3: policies[0].name: "caf\"e": printable ASCII`},
		{`'café'`, `f.yaml:3: policies[0].name: "café": printable ASCII`},
		{`'a\b'`, `f.yaml:3: policies[0].name: "a\\b": printable ASCII`},
		{`a/b`, `f.yaml:3: policies[0].name: "a/b": printable ASCII`},
		{`a b`, `f.yaml:3: policies[0].name: "a b": printable ASCII`},
		{`"a\tb"`, `f.yaml:3: policies[0].name: "a\tb": printable ASCII`},
		{`api-v2_x.y:z~`, ""},
	} {
		text := "routes: [{name: a, upstream: \"http://127.0.0.1:1\", policy: " + tc.yaml + "}]\npolicies:\n  - name: " + tc.yaml + "\n    rate: {rate: 1, burst: 1}\n"
		err := checkText(text)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// listen and admin.listen are host:port with a numeric port, checked at
// their line: -check passed 127.0.0.1:99999 and 127.0.0.1:port, and
// serving then failed without file:line and with exit 1, not 2.
func TestListenAddrChecked(t *testing.T) {
	const route = "routes: [{name: a, upstream: \"http://127.0.0.1:1\"}]\n"
	for _, tc := range []struct{ text, want string }{
		{"listen: 127.0.0.1:99999\n", `f.yaml:1: listen: "127.0.0.1:99999": port "99999": want a number from 0 to 65535`},
		{"listen: 127.0.0.1:port\n", `f.yaml:1: listen: "127.0.0.1:port": port "port": want a number from 0 to 65535`},
		{"listen: 127.0.0.1:-1\n", `f.yaml:1: listen: "127.0.0.1:-1": port "-1"`},
		{"listen: a:b:c\n", `f.yaml:1: listen: "a:b:c": want host:port`},
		{"admin: {listen: \"127.0.0.1:99999\"}\n", `f.yaml:1: admin.listen: "127.0.0.1:99999": port "99999"`},
		{"admin:\n  listen: localhost:admin\n", `f.yaml:2: admin.listen: "localhost:admin": port "admin"`},
		{"listen: :0\n", ""},
		{"listen: \"[::1]:65535\"\n", ""},
	} {
		err := checkText(tc.text + route)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.text, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}

// Two routes whose methods are the same set, in another order or with a
// method repeated, match the same requests: the second would never be
// used, and -check says so as it does for identical lists.
func TestRouteMethodsSameSet(t *testing.T) {
	const r = "  - {name: %s, upstream: \"http://127.0.0.1:1\", methods: %s}\n"
	for _, tc := range []struct{ a, b, want string }{
		{"[GET, HEAD]", "[HEAD, GET]", "f.yaml:3: routes[1]: matches the same requests as routes[0]"},
		{"[GET]", "[GET, GET]", "f.yaml:3: routes[1]: matches the same requests as routes[0]"},
		{"[GET]", "[GET, HEAD]", ""},
	} {
		err := checkText("routes:\n" + fmt.Sprintf(r, "a", tc.a) + fmt.Sprintf(r, "b", tc.b))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s, %s: %v", tc.a, tc.b, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("%s, %s: %v, want %q", tc.a, tc.b, err, tc.want)
		}
	}
}

// An adaptive section written with an empty value is an adaptive limit
// with every default, as {} is: it was dropped, and the error then named
// concurrency.limit, which the file never wrote. Other sections written
// empty are reported at their own keys.
func TestEmptySectionIsPresent(t *testing.T) {
	const route = "routes: [{name: a, upstream: \"http://127.0.0.1:1\", policy: p}]\npolicies:\n  - name: p\n"
	for _, adaptive := range []string{"    concurrency:\n      adaptive:\n", "    concurrency: {adaptive: null}\n"} {
		c, err := ParseConfig("f.yaml", []byte(route+adaptive))
		if err == nil {
			err = Check(c)
		}
		if err != nil {
			t.Errorf("%q: %v", adaptive, err)
			continue
		}
		if a := c.Policies[0].adaptive(); a == nil || a.Algorithm != RecommendedAlgorithm {
			t.Errorf("%q: adaptive %+v, want the recommended algorithm", adaptive, a)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"    rate:\n", "f.yaml:4: policies[0].rate.rate"},
		{"    concurrency:\n", "f.yaml:4: policies[0].concurrency.limit"},
	} {
		if err := checkText(route + tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}
