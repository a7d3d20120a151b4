package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
)

// A route host with a port would never match (requests are matched by
// host without their port): it is refused, naming the field.
func TestRouteHostWithPortRefused(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"example.test:8080", `f.yaml:1: routes[0].host: "example.test:8080" has a port (8080)`},
		{"\"[::1]:80\"", `f.yaml:1: routes[0].host: "[::1]:80" has a port (80)`},
		{"example.test", ""},
		{"\"[::1]\"", ""},
		{"\"::1\"", ""},
	} {
		err := checkText("routes: [{name: a, host: " + tc.host + ", upstream: \"http://127.0.0.1:1\"}]\n")
		if tc.want == "" {
			if err != nil {
				t.Errorf("host %s: %v", tc.host, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, yamlfile.ErrInvalid) {
			t.Errorf("host %s: %v, want %q", tc.host, err, tc.want)
		}
	}
}

// routes starts a proxy whose catch-all route goes to an upstream that
// answers "a METHOD PATH", with more routes (text, UPSTREAM_B for their upstream)
// to one that answers "b METHOD PATH".
func routes(t *testing.T, more string) (*running, *http.Client) {
	a := upstream(t, echo("a"))
	b := upstream(t, echo("b"))
	return start(t, "routes:\n  - name: any\n    upstream: UPSTREAM\n"+strings.ReplaceAll(more, "UPSTREAM_B", b), a), client(t)
}

// hostsReachB checks that GET /x with each Host header reaches upstream b.
func hostsReachB(t *testing.T, p *running, c *http.Client, hosts ...string) {
	t.Helper()
	for _, host := range hosts {
		req := newReq(t, "GET", p.url+"/x")
		req.Host = host
		resp, body := get(t, c, req)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "b GET /x") {
			t.Errorf("Host %s: %d %q, want the host's route", host, resp.StatusCode, body)
		}
	}
}

// An IPv6 literal host matches with and without the request's port.
func TestRouteHostIPv6Literal(t *testing.T) {
	p, c := routes(t, "  - name: v6\n    host: \"[::1]\"\n    upstream: UPSTREAM_B\n")
	hostsReachB(t, p, c, "[::1]", "[::1]:8080", "[::1]:80")
}

// Routes match the clean path and the host without its final dot, and the
// upstream gets the clean path: another spelling of /expensive or of
// api.example.com does not pass the catch-all's limits instead of its own.
func TestRouteMatchesCleanPathAndHost(t *testing.T) {
	p, c := routes(t, `  - name: expensive
    path_prefix: /expensive
    upstream: UPSTREAM_B
  - name: api
    host: api.example.com.
    upstream: UPSTREAM_B
`)
	for _, path := range []string{"/expensive", "/x/../expensive", "//expensive", "/./expensive", "/expensive/a/../", "/%2e%2e/expensive"} {
		resp, body := get(t, c, newReq(t, "GET", p.url+path))
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "b GET /expensive") {
			t.Errorf("path %s: %d %q, want the expensive route, clean", path, resp.StatusCode, body)
		}
	}
	hostsReachB(t, p, c, "api.example.com", "API.example.com.", "api.example.com.:8080")
}

// A policy name is bounded: it is in every key of a shared store's
// limits, which redisstore bounds at MaxKeyLen.
func TestPolicyNameBounded(t *testing.T) {
	text := func(name string) string {
		return "routes: [{name: a, upstream: \"http://127.0.0.1:1\", policy: " + name + "}]\n" +
			"policies: [{name: " + name + ", rate: {rate: 1, burst: 1, per_key: true}}]\n"
	}
	if err := checkText(text(strings.Repeat("n", 128))); err != nil {
		t.Errorf("128-byte name: %v", err)
	}
	err := checkText(text(strings.Repeat("n", 1000)))
	if want := "f.yaml:2: policies[0].name: 1000 bytes long: at most 128"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("1000-byte name: %v, want %q", err, want)
	}
}
