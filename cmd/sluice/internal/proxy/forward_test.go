package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// headersEcho answers with the forwarding headers the upstream received.
func headersEcho(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "xff=%q fwd=%q", r.Header.Get("X-Forwarded-For"), r.Header.Get("Forwarded"))
	if v := r.Header.Get("X-Real-IP") + r.Header.Get("True-Client-IP"); v != "" {
		fmt.Fprintf(w, " real=%q", v)
	}
}

// A forged forwarding chain reaches the upstream only from a trusted
// proxy; from anyone else it is replaced by the peer's address, and the
// other client-address headers (X-Real-IP, True-Client-IP…) are removed.
func TestForwardingChainOnlyFromTrustedPeers(t *testing.T) {
	up := upstream(t, headersEcho)
	for _, tc := range []struct {
		name, clientIP string
		want           string
	}{
		{"xff untrusted", `{}`, `xff="127.0.0.1" fwd=""`},
		{"xff trusted", `{trusted_proxies: [127.0.0.1/32]}`, `xff="6.6.6.6, 127.0.0.1" fwd="" real="6.6.6.66.6.6.6"`},
		{"xff other trusted", `{trusted_proxies: [10.0.0.0/8]}`, `xff="127.0.0.1" fwd=""`},
		{"forwarded untrusted", `{header: Forwarded}`, `xff="127.0.0.1" fwd="for=127.0.0.1;proto=http"`},
		{"forwarded trusted", `{header: Forwarded, trusted_proxies: [127.0.0.0/8]}`,
			`xff="6.6.6.6, 127.0.0.1" fwd="for=6.6.6.6, for=127.0.0.1;proto=http" real="6.6.6.66.6.6.6"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, "client_ip: "+tc.clientIP+"\nroutes:\n  - name: api\n    upstream: UPSTREAM\n", up)
			req := newReq(t, "GET", p.url+"/")
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("Forwarded", "for=6.6.6.6")
			// Other client-address claims pass only from a trusted peer.
			req.Header.Set("X-Real-IP", "6.6.6.6")
			req.Header.Set("True-Client-IP", "6.6.6.6")
			resp, body := get(t, client(t), req)
			if resp.StatusCode != 200 || body != tc.want {
				t.Errorf("upstream saw %d %s, want %s", resp.StatusCode, body, tc.want)
			}
		})
	}
}

// Two sluice proxies in a row, the second trusting the first: the
// upstream sees the first's peer as the client, never the client's
// forgery, and the second keeps the first's Forwarded chain.
func TestForwardedChainThroughTwoProxies(t *testing.T) {
	up := upstream(t, headersEcho)
	inner := start(t, `
client_ip: {header: Forwarded, trusted_proxies: [127.0.0.1]}
routes:
  - name: api
    upstream: UPSTREAM
`, up)
	outer := start(t, `
client_ip: {header: Forwarded}
routes:
  - name: api
    upstream: UPSTREAM
`, inner.url)
	req := newReq(t, "GET", outer.url+"/")
	req.Header.Set("Forwarded", "for=6.6.6.6")
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	_, body := get(t, client(t), req)
	want := `xff="127.0.0.1, 127.0.0.1" fwd="for=127.0.0.1;proto=http, for=127.0.0.1;proto=http"`
	if body != want || strings.Contains(body, "6.6.6.6") {
		t.Errorf("upstream saw %s, want %s", body, want)
	}
}

// Behind a TLS terminator in client_ip.trusted_proxies the upstream sees
// the client's scheme and host as the terminator wrote them, not the
// proxy's own view of its hop (http); from any other peer, the proxy's.
func TestForwardedProtoAndHostFromTrustedPeers(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proto=%q host=%q", r.Header.Values("X-Forwarded-Proto"), r.Header.Values("X-Forwarded-Host"))
	})
	for _, tc := range []struct {
		name, clientIP, want string
	}{
		{"trusted", `{trusted_proxies: [127.0.0.1/32]}`, `proto=["https"] host=["example.com"]`},
		{"untrusted", `{}`, `proto=["http"] host=["proxied.test"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, "client_ip: "+tc.clientIP+"\nroutes:\n  - name: api\n    upstream: UPSTREAM\n", up)
			req := newReq(t, "GET", p.url+"/")
			req.Host = "proxied.test"
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Forwarded-Host", "example.com")
			resp, body := get(t, client(t), req)
			if resp.StatusCode != 200 || body != tc.want {
				t.Errorf("upstream saw %d %s, want %s", resp.StatusCode, body, tc.want)
			}
		})
	}
}
