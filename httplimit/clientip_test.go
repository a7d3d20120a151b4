package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestClientIPKey(t *testing.T) {
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1"}
	tests := []struct {
		name   string
		cfg    IPConfig
		remote string
		header string   // the header the request carries
		values []string // its lines
		want   string
		wantOK bool
	}{
		// No trusted proxies: the header is never read.
		{name: "peer", remote: "203.0.113.7:5555", want: "203.0.113.7", wantOK: true},
		{name: "spoofed XFF ignored by default", remote: "203.0.113.7:5555",
			header: "X-Forwarded-For", values: []string{"1.1.1.1"}, want: "203.0.113.7", wantOK: true},
		{name: "spoofed Forwarded ignored by default", remote: "203.0.113.7:5555",
			header: "Forwarded", values: []string{"for=1.1.1.1"}, want: "203.0.113.7", wantOK: true},
		{name: "spoof from untrusted peer", cfg: IPConfig{TrustedProxies: proxies}, remote: "203.0.113.7:5555",
			header: "X-Forwarded-For", values: []string{"10.1.1.1, 1.1.1.1"}, want: "203.0.113.7", wantOK: true},
		{name: "ipv6 peer", remote: "[2001:db8::1]:443", want: "2001:db8::1", wantOK: true},
		{name: "ipv6 peer with zone", remote: "[fe80::1%eth0]:443", want: "fe80::1", wantOK: true},
		{name: "v4-mapped peer", remote: "[::ffff:203.0.113.7]:80", want: "203.0.113.7", wantOK: true},
		{name: "no port", remote: "203.0.113.7", want: "203.0.113.7", wantOK: true},
		{name: "garbage peer", remote: "pipe", wantOK: false},
		{name: "empty peer", remote: "", wantOK: false},

		// Behind trusted proxies.
		{name: "one hop", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"198.51.100.9"}, want: "198.51.100.9", wantOK: true},
		{name: "client-supplied prefix skipped", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1, 2.2.2.2, 198.51.100.9"}, want: "198.51.100.9", wantOK: true},
		{name: "trusted hops skipped", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1, 198.51.100.9, 10.9.9.9, 192.0.2.1"}, want: "198.51.100.9", wantOK: true},
		{name: "hops over several lines", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1, 198.51.100.9", "10.9.9.9"}, want: "198.51.100.9", wantOK: true},
		{name: "all hops trusted", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"10.3.3.3, 10.9.9.9"}, want: "10.3.3.3", wantOK: true},
		{name: "no header from trusted peer", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			want: "10.0.0.2", wantOK: true},
		{name: "garbage hop stops the walk", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1, garbage, 10.9.9.9"}, want: "10.9.9.9", wantOK: true},
		{name: "garbage rightmost", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1, not-an-ip"}, want: "10.0.0.2", wantOK: true},
		{name: "empty hop", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1,,"}, want: "10.0.0.2", wantOK: true},
		{name: "hop with port", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"198.51.100.9:4711"}, want: "198.51.100.9", wantOK: true},
		{name: "hop with bad port", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"198.51.100.9:http"}, want: "10.0.0.2", wantOK: true},
		{name: "ipv6 hops", cfg: IPConfig{TrustedProxies: proxies}, remote: "[2001:db8:ffff::2]:1",
			header: "X-Forwarded-For", values: []string{"2001:db8:1::5, [2001:db8:ffff::9]:80"}, want: "2001:db8:1::5", wantOK: true},
		{name: "other header ignored", cfg: IPConfig{TrustedProxies: proxies}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{"for=1.1.1.1"}, want: "10.0.0.2", wantOK: true},
		{name: "trusted single address", cfg: IPConfig{TrustedProxies: proxies}, remote: "192.0.2.1:1",
			header: "X-Forwarded-For", values: []string{"198.51.100.9"}, want: "198.51.100.9", wantOK: true},
		{name: "neighbour of single address untrusted", cfg: IPConfig{TrustedProxies: proxies}, remote: "192.0.2.2:1",
			header: "X-Forwarded-For", values: []string{"198.51.100.9"}, want: "192.0.2.2", wantOK: true},

		// RFC 7239 Forwarded.
		{name: "forwarded", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=1.1.1.1, for=198.51.100.9;proto=https;by=10.0.0.2`}, want: "198.51.100.9", wantOK: true},
		{name: "forwarded quoted ipv6", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`For="[2001:db8:cafe::17]:4711", for=10.5.5.5`}, want: "2001:db8:cafe::17", wantOK: true},
		{name: "forwarded obfuscated", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=1.1.1.1, for=_hidden, for=10.5.5.5`}, want: "10.5.5.5", wantOK: true},
		{name: "forwarded unknown", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=unknown`}, want: "10.0.0.2", wantOK: true},
		{name: "forwarded element without for", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=1.1.1.1, proto=http`}, want: "10.0.0.2", wantOK: true},
		// A proxy copies client input into quoted parameters (host=):
		// a comma or semicolon there does not start an element or a
		// parameter, so the client cannot write its own for= into the
		// proxy's element.
		{name: "forwarded comma inside quotes", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=198.51.100.7;host="x,for=203.0.113.66;a="`}, want: "198.51.100.7", wantOK: true},
		{name: "forwarded semicolon inside quotes", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`host="a;for=203.0.113.66;x=";for=198.51.100.7`}, want: "198.51.100.7", wantOK: true},
		{name: "forwarded escaped quote inside quotes", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=198.51.100.7;host="x\",for=203.0.113.66"`}, want: "198.51.100.7", wantOK: true},
		// Unbalanced quotes: no element of the line can be read, so the
		// walk ends at the last address a trusted hop vouched for.
		{name: "forwarded unbalanced quote", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=1.1.1.1, for=198.51.100.7;host="x, for=203.0.113.66`}, want: "10.0.0.2", wantOK: true},
		{name: "forwarded unbalanced quote in an earlier line", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for="1.1.1.1`, `for=10.5.5.5`}, want: "10.5.5.5", wantOK: true},
		{name: "forwarded empty element", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=1.1.1.1,,`}, want: "10.0.0.2", wantOK: true},
		{name: "forwarded empty line", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=198.51.100.7`, ``}, want: "198.51.100.7", wantOK: true},
		{name: "forwarded many elements", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "Forwarded", values: []string{`for=198.51.100.7, for=10.0.0.1, for=10.0.0.2, for=10.0.0.3, for=10.0.0.4, for=10.0.0.5, for=10.0.0.6, for=10.0.0.7, for=10.0.0.8, for=10.0.0.9`}, want: "198.51.100.7", wantOK: true},
		{name: "xff ignored when Forwarded configured", cfg: IPConfig{TrustedProxies: proxies, ProxyHeader: "Forwarded"}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"1.1.1.1"}, want: "10.0.0.2", wantOK: true},

		// IPv6 masking.
		{name: "ipv6 masked", cfg: IPConfig{IPv6Prefix: 64}, remote: "[2001:db8:1:2:3:4:5:6]:1", want: "2001:db8:1:2::/64", wantOK: true},
		{name: "ipv4 not masked", cfg: IPConfig{IPv6Prefix: 64}, remote: "203.0.113.7:1", want: "203.0.113.7", wantOK: true},
		{name: "v4-mapped not masked", cfg: IPConfig{IPv6Prefix: 64}, remote: "[::ffff:203.0.113.7]:1", want: "203.0.113.7", wantOK: true},
		{name: "forwarded ipv6 masked", cfg: IPConfig{TrustedProxies: proxies, IPv6Prefix: 48}, remote: "10.0.0.2:1",
			header: "X-Forwarded-For", values: []string{"2001:db8:1:2::9"}, want: "2001:db8:1::/48", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClientIP(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.values {
				r.Header.Add(tt.header, v)
			}
			got, ok := c.Key(r)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Key = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestNewClientIPErrors(t *testing.T) {
	tests := []struct {
		cfg   IPConfig
		field string
	}{
		{IPConfig{TrustedProxies: []string{"10.0.0.0/8", "10.0.0.0/33"}}, "TrustedProxies[1]"},
		{IPConfig{TrustedProxies: []string{"proxy.internal"}}, "TrustedProxies[0]"},
		{IPConfig{TrustedProxies: []string{""}}, "TrustedProxies[0]"},
		{IPConfig{ProxyHeader: "X-Real-IP"}, "ProxyHeader"},
		{IPConfig{IPv6Prefix: 129}, "IPv6Prefix"},
		{IPConfig{IPv6Prefix: -1}, "IPv6Prefix"},
	}
	for _, tt := range tests {
		_, err := NewClientIP(tt.cfg)
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("NewClientIP(%+v) = %v; want an sluice.ErrInvalidConfig naming %s", tt.cfg, err, tt.field)
		}
	}
}

func TestTrustedProxyForms(t *testing.T) {
	// Non-canonical prefixes and v4-mapped forms trust what they say.
	c, err := NewClientIP(IPConfig{TrustedProxies: []string{" 10.1.2.3/8 ", "::ffff:192.0.2.0/120"}})
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]string{
		"10.200.0.1:1": "198.51.100.9", // in 10.0.0.0/8
		"192.0.2.77:1": "198.51.100.9", // in 192.0.2.0/24
		"192.0.3.1:1":  "192.0.3.1",
		"11.0.0.1:1":   "11.0.0.1",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "198.51.100.9")
		if got, _ := c.Key(r); got != want {
			t.Errorf("peer %s: key %q, want %q", remote, got, want)
		}
	}
}

func TestBuiltinKeys(t *testing.T) {
	r := httptest.NewRequest("POST", "/items/7", nil)
	r.Header.Set("X-Api-Key", "k1")
	if k, ok := HeaderKey("x-api-key")(r); k != "k1" || !ok {
		t.Errorf("HeaderKey = %q, %v", k, ok)
	}
	if _, ok := HeaderKey("Authorization")(r); ok {
		t.Error("HeaderKey of a missing header is usable")
	}
	r.Header.Set("X-Long", strings.Repeat("a", MaxKeyLen+1))
	if _, ok := HeaderKey("X-Long")(r); ok {
		t.Error("HeaderKey of an over-long value is usable")
	}
	if k, ok := PathKey(r); k != "/items/7" || !ok {
		t.Errorf("PathKey = %q, %v", k, ok)
	}
	if k, ok := MethodKey(r); k != "POST" || !ok {
		t.Errorf("MethodKey = %q, %v", k, ok)
	}
	if _, ok := PatternKey(r); ok {
		t.Error("PatternKey outside a mux is usable")
	}
	mux := http.NewServeMux()
	var got string
	mux.HandleFunc("POST /items/{id}", func(w http.ResponseWriter, r *http.Request) { got, _ = PatternKey(r) })
	mux.ServeHTTP(httptest.NewRecorder(), r)
	if got != "POST /items/{id}" {
		t.Errorf("PatternKey in a mux = %q", got)
	}
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.2:1", "1.1.1.1, 198.51.100.9")
	f.Add("10.0.0.2:1", `for="[2001:db8::1]:80";by=x, for=10.0.0.9`)
	f.Add("[::1]:1", ",,,[")
	xff, _ := NewClientIP(IPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	fwd, _ := NewClientIP(IPConfig{TrustedProxies: []string{"10.0.0.0/8"}, ProxyHeader: "Forwarded", IPv6Prefix: 64})
	f.Fuzz(func(t *testing.T, remote, header string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", header)
		r.Header.Set("Forwarded", header)
		for _, c := range []*ClientIP{xff, fwd} {
			a, ok := c.Addr(r)
			if !ok {
				continue
			}
			// Whatever the header says, the key is either the peer or an
			// address that came after a trusted hop.
			peer, _ := parseHop(remote)
			if a != peer && !c.isTrusted(peer) {
				t.Fatalf("untrusted peer %s produced key %s", peer, a)
			}
		}
	})
}

// Whatever a client puts in a parameter that a trusted proxy quotes (its
// Host, in host="..."), the key is the address that proxy wrote in for=.
func FuzzForwardedQuoted(f *testing.F) {
	f.Add(`x,for=203.0.113.66;a=`)
	f.Add(`a;for=203.0.113.66;x=`)
	f.Add(`x", for=203.0.113.66, "`)
	f.Add(`\`)
	c, _ := NewClientIP(IPConfig{TrustedProxies: []string{"10.0.0.0/8"}, ProxyHeader: "Forwarded"})
	quote := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	f.Fuzz(func(t *testing.T, host string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:1"
		r.Header.Set("Forwarded", `for=198.51.100.7;host="`+quote.Replace(host)+`";proto=http`)
		if got, _ := c.Key(r); got != "198.51.100.7" {
			t.Fatalf("host %q: key %q, want 198.51.100.7", host, got)
		}
	})
}

// The zero ClientIP keys by the whole peer address, as NewClientIP with a
// zero IPConfig does: an IPv6 client is not masked into one key for all.
func TestZeroClientIP(t *testing.T) {
	built, err := NewClientIP(IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"[2001:db8::1]:443", "203.0.113.7:1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		zero, zok := (&ClientIP{}).Key(r)
		want, wok := built.Key(r)
		if zero != want || zok != wok || strings.Contains(zero, "/") {
			t.Errorf("%s: zero ClientIP keys %q, %v; NewClientIP(IPConfig{}) %q, %v", remote, zero, zok, want, wok)
		}
	}
}

// keyRecorder is a Keyed that admits everything and records the keys it
// was asked for.
type keyRecorder struct{ keys []string }

func (k *keyRecorder) Acquire(_ context.Context, key string) (sluice.Permit, error) {
	return k.TryAcquire(key)
}

func (k *keyRecorder) TryAcquire(key string) (sluice.Permit, error) {
	k.keys = append(k.keys, key)
	return sluice.Permit{}, nil
}

// FuzzKeys: whatever a client sends in the header, path or method a key is
// read from, and whatever a custom KeyFunc makes of it, the middleware
// neither panics nor hands the per-key limiter a key longer than MaxKeyLen,
// and a request without a usable key is counted against the fallback.
func FuzzKeys(f *testing.F) {
	f.Add("alice", "/items/1", "GET")
	f.Add("", "", "")
	f.Add(strings.Repeat("k", MaxKeyLen+1), "/"+strings.Repeat("p", 2*MaxKeyLen), "M")
	f.Fuzz(func(t *testing.T, value, path, method string) {
		keys := []KeyFunc{
			HeaderKey("X-Api-Key"), PathKey, MethodKey, PatternKey,
			func(r *http.Request) (string, bool) { return r.Header.Get("X-Api-Key"), true },
		}
		for i, key := range keys {
			rec := &keyRecorder{}
			h := mustNew(t, okHandler, Config{PerKey: rec, Key: key, NoWait: true})
			r := httptest.NewRequest("GET", "/", nil)
			r.Header["X-Api-Key"] = []string{value}
			r.URL.Path, r.Method = path, method
			if w := serve(h, r); w.Code != http.StatusOK {
				t.Fatalf("key %d: status %d", i, w.Code)
			}
			want, ok := key(r)
			if len(rec.keys) != 1 || len(rec.keys[0]) > MaxKeyLen {
				t.Fatalf("key %d: the limiter was asked for %q", i, rec.keys)
			}
			if !ok && (rec.keys[0] != defaultFallbackKey || h.Stats().FallbackKeys != 1) {
				t.Fatalf("key %d: no usable key, but the limiter got %q and stats %+v", i, rec.keys[0], h.Stats())
			}
			if ok && len(want) <= MaxKeyLen && rec.keys[0] != want {
				t.Fatalf("key %d: the limiter got %q, want %q", i, rec.keys[0], want)
			}
		}
	})
}
