package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
)

// Validation: a config is checked in full, every error at its file:line:
// field, before anything is built from it.

// validate checks what decoding could not and fills in defaults. The
// limiters' own constructors check the rest when the policies are built
// (see build), so their ranges are written once.
func (c *Config) validate() error {
	if err := checkAddr(c.Listen); err != nil {
		return c.errAt("listen", "%v", err)
	}
	if err := checkAddr(c.Admin.Listen); err != nil {
		return c.errAt("admin.listen", "%v", err)
	}
	if c.DrainTimeout < 0 {
		return c.errAt("drain_timeout", "must be >= 0, got %v", c.DrainTimeout)
	}
	if err := c.validateServer(); err != nil {
		return err
	}
	if c.Reload.Poll < 0 || c.Reload.Poll > 0 && c.Reload.Poll < minPoll {
		// Each poll is an os.Stat: 1ns would spin a core.
		return c.errAt("reload.poll", "must be 0s (no polling) or at least %v, got %v", minPoll, c.Reload.Poll)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return c.errAt("log.format", "%q: want text or json", c.Log.Format)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		return c.errAt("log.level", "%v", err)
	}
	stores := map[string]int{}
	for i := range c.Stores {
		s := &c.Stores[i]
		at := fmt.Sprintf("stores[%d]", i)
		if err := c.validateStore(s, at); err != nil {
			return err
		}
		if j, ok := stores[s.Name]; ok {
			return c.errAt(at+".name", "%q already names stores[%d]", s.Name, j)
		}
		stores[s.Name] = i
	}
	for i, p := range c.ClientIP.TrustedProxies {
		// httplimit reads them, for the client_ip key and for the
		// forwarding headers: one at a time, for an error at its index.
		if _, err := httplimit.NewClientIP(httplimit.IPConfig{TrustedProxies: []string{p}}); err != nil {
			return c.errAt(fmt.Sprintf("client_ip.trusted_proxies[%d]", i), "%q is neither a CIDR prefix (10.0.0.0/8) nor an address", p)
		}
	}
	switch c.ClientIP.Header {
	case "", "X-Forwarded-For", "Forwarded":
	default:
		return c.errAt("client_ip.header", "%q: want X-Forwarded-For or Forwarded", c.ClientIP.Header)
	}
	if c.ClientIP.IPv6Prefix < 0 || c.ClientIP.IPv6Prefix > 128 {
		return c.errAt("client_ip.ipv6_prefix", "must be within [0, 128], got %d", c.ClientIP.IPv6Prefix)
	}
	policies := map[string]int{}
	for i := range c.Policies {
		p := &c.Policies[i]
		at := fmt.Sprintf("policies[%d]", i)
		if err := c.validatePolicy(p, at, stores); err != nil {
			return err
		}
		if j, ok := policies[p.Name]; ok {
			return c.errAt(at+".name", "%q already names policies[%d]", p.Name, j)
		}
		policies[p.Name] = i
	}
	if len(c.Routes) == 0 {
		return c.errAt("routes", "no routes: the proxy would answer every request 404")
	}
	routes := map[string]int{}
	matches := map[string]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		at := fmt.Sprintf("routes[%d]", i)
		if err := c.validateRoute(r, at, policies); err != nil {
			return err
		}
		if j, ok := routes[r.Name]; ok {
			return c.errAt(at+".name", "%q already names routes[%d]", r.Name, j)
		}
		routes[r.Name] = i
		// The methods as a set: [HEAD, GET] and [GET, GET, HEAD]
		// match what [GET, HEAD] does.
		ms := slices.Compact(slices.Sorted(slices.Values(r.Methods)))
		m := r.Host + " " + r.PathPrefix + " " + strings.Join(ms, ",")
		if j, ok := matches[m]; ok {
			return c.errAt(at, "matches the same requests as routes[%d] (host, path_prefix, methods): it would never be used", j)
		}
		matches[m] = i
	}
	return nil
}

func (c *Config) validateRoute(r *Route, at string, policies map[string]int) error {
	if r.Name == "" {
		return c.errAt(at+".name", "required")
	}
	if r.PathPrefix == "" {
		r.PathPrefix = "/"
	}
	if !strings.HasPrefix(r.PathPrefix, "/") {
		return c.errAt(at+".path_prefix", "%q must start with /", r.PathPrefix)
	}
	r.Host = strings.ToLower(r.Host)
	if err := checkRouteHost(r.Host); err != nil {
		return c.errAt(at+".host", "%v", err)
	}
	r.Host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"), ".") // as requestHost reads an IPv6 literal and a fully qualified name
	for j, m := range r.Methods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t/") {
			return c.errAt(fmt.Sprintf("%s.methods[%d]", at, j), "%q is not an HTTP method (write it in capitals: GET)", m)
		}
	}
	u, err := url.Parse(r.Upstream)
	switch {
	case r.Upstream == "":
		return c.errAt(at+".upstream", "required (e.g. http://127.0.0.1:9000)")
	case !strings.Contains(r.Upstream, "://"):
		// 127.0.0.1:9000 parses as a scheme and an opaque part, or not at
		// all ("first path segment in URL cannot contain colon").
		return c.errAt(at+".upstream", "%q: want an http:// or https:// URL, like http://%s", r.Upstream, r.Upstream)
	case err != nil:
		return c.errAt(at+".upstream", "%q does not parse: %v", r.Upstream, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return c.errAt(at+".upstream", "%q: want an http:// or https:// URL", r.Upstream)
	case u.Host == "":
		return c.errAt(at+".upstream", "%q has no host", r.Upstream)
	}
	if r.Policy != "" {
		if _, ok := policies[r.Policy]; !ok {
			return c.errAt(at+".policy", "%q is not the name of a policy", r.Policy)
		}
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	} else if r.Timeout < 0 {
		return c.errAt(at+".timeout", "must be > 0, got %v", r.Timeout)
	}
	if r.StreamAfter == 0 {
		r.StreamAfter = DefaultStreamAfter
	} else if r.StreamAfter < 0 {
		return c.errAt(at+".stream_after", "must be > 0, got %v", r.StreamAfter)
	}
	switch r.OnClientGone {
	case "":
		r.OnClientGone = ClientGoneWait
	case ClientGoneWait, ClientGoneCancel:
	default:
		return c.errAt(at+".on_client_gone", "%q: want wait or cancel", r.OnClientGone)
	}
	if h := r.DeadlineHeader; h != "" && (strings.ContainsAny(h, " \t:") || http.CanonicalHeaderKey(h) == "") {
		return c.errAt(at+".deadline_header", "%q is not a header name", h)
	}
	if r.DeadlineHeader != "" && r.Policy == "" {
		return c.errAt(at+".deadline_header", "tells the route's limits the client's deadline: the route has no policy")
	}
	if r.FlushInterval < -1 {
		return c.errAt(at+".flush_interval", "must be -1 (flush every write), 0 (default) or a positive duration, got %v", r.FlushInterval)
	}
	return nil
}

func (c *Config) validatePolicy(p *Policy, at string, stores map[string]int) error {
	if p.Name == "" {
		return c.errAt(at+".name", "required")
	}
	if len(p.Name) > maxPolicyName {
		// The name is in the keys of a shared store's limits, next to the
		// client's key, under redisstore.MaxKeyLen.
		return c.errAt(at+".name", "%d bytes long: at most %d", len(p.Name), maxPolicyName)
	}
	if err := checkPolicyName(p.Name); err != nil {
		return c.errAt(at+".name", "%v", err)
	}
	if p.Rate == nil && p.Concurrency == nil && p.PerKeyConcurrency == nil {
		return c.errAt(at, "sets no limit: give it rate, concurrency or per_key_concurrency")
	}
	if p.Key == "" {
		p.Key = "client_ip"
	}
	if _, err := parseKey(p.Key); err != nil {
		return c.errAt(at+".key", "%v", err)
	}
	if p.MaxKeys == 0 {
		p.MaxKeys = DefaultMaxKeys
	} else if p.MaxKeys < 1 || p.MaxKeys > maxMaxKeys {
		return c.errAt(at+".max_keys", "must be within [1, %d], got %d", maxMaxKeys, p.MaxKeys)
	}
	if p.MaxWait == 0 {
		p.MaxWait = DefaultMaxWait
	} else if p.MaxWait < 0 {
		return c.errAt(at+".max_wait", "must be > 0, got %v", p.MaxWait)
	}
	if p.MaxWaiting == 0 {
		p.MaxWaiting = DefaultMaxWaiting
	} else if p.MaxWaiting < 1 || p.MaxWaiting > maxMaxKeys {
		return c.errAt(at+".max_waiting", "must be within [1, %d], got %d", maxMaxKeys, p.MaxWaiting)
	}
	if p.MaxWaitingPerKey == 0 {
		p.MaxWaitingPerKey = DefaultMaxWaitingPerKey
	} else if p.MaxWaitingPerKey < 1 || p.MaxWaitingPerKey > maxMaxKeys {
		return c.errAt(at+".max_waiting_per_key", "must be within [1, %d], got %d", maxMaxKeys, p.MaxWaitingPerKey)
	}
	if p.QuotaStatus == 0 {
		p.QuotaStatus = 429
	} else if p.QuotaStatus < 400 || p.QuotaStatus > 599 {
		return c.errAt(at+".quota_status", "must be a 4xx or 5xx status, got %d", p.QuotaStatus)
	}
	if p.CapacityStatus == 0 {
		p.CapacityStatus = 503
	} else if p.CapacityStatus < 400 || p.CapacityStatus > 599 {
		return c.errAt(at+".capacity_status", "must be a 4xx or 5xx status, got %d", p.CapacityStatus)
	}
	if err := c.validateRate(p.Rate, at); err != nil {
		return err
	}
	if err := c.validateShared(p, at, stores); err != nil {
		return err
	}
	if a := p.adaptive(); a != nil {
		if a.Algorithm == "" {
			a.Algorithm = RecommendedAlgorithm
		}
		if _, ok := algorithms[a.Algorithm]; !ok {
			return c.errAt(at+".concurrency.adaptive.algorithm", "%q: want one of %s", a.Algorithm, algorithmNames())
		}
	}
	return nil
}

// validateShared checks that a policy kept in a shared store asks only
// for what the store shares: a token bucket (global or per key) and a
// fixed concurrency limit.
func (c *Config) validateShared(p *Policy, at string, stores map[string]int) error {
	if p.Store == "" {
		p.Store = "memory"
	}
	if p.Store == "memory" {
		return nil
	}
	if _, ok := stores[p.Store]; !ok {
		return c.errAt(at+".store", "%q is not the name of a store (memory, or one of stores[].name)", p.Store)
	}
	if p.PerKeyConcurrency != nil {
		return c.errAt(at+".per_key_concurrency", "is not shared through a store: drop it or store: memory")
	}
	if cs := p.Concurrency; cs != nil {
		switch {
		case cs.Adaptive != nil:
			return c.errAt(at+".concurrency.adaptive", "an adaptive limit is found by each proxy and is not shared through a store: drop it or store: memory")
		case cs.MaxQueue != 0:
			return c.errAt(at+".concurrency.max_queue", "a shared concurrency limit has no queue (waiters poll the store until max_wait): drop it")
		case cs.Discipline != concurrency.FIFO:
			return c.errAt(at+".concurrency.discipline", "a shared concurrency limit has no queue discipline: drop it")
		case cs.MaxWaitServices != 0:
			return c.errAt(at+".concurrency.max_wait_services", "a shared concurrency limit has no queue (waiters poll the store until max_wait): drop it")
		}
	}
	return nil
}

func (p *Policy) adaptive() *AdaptiveSpec {
	if p.Concurrency == nil {
		return nil
	}
	return p.Concurrency.Adaptive
}

// checkPolicyName refuses a policy name that a route naming the policy
// could not be built with, so that the error is at the name and not at
// every routes[].policy: the name is a quoted string in the
// RateLimit-Policy field (httplimit.ValidPolicyName has the rule) and a
// path segment in the admin API (PUT /limits/NAME), for which spaces and
// slashes are refused as well.
func checkPolicyName(n string) error {
	if !httplimit.ValidPolicyName(n) || strings.ContainsAny(n, " /") {
		return fmt.Errorf("%q: printable ASCII without spaces, slashes, quotes or backslashes (it is a path in the admin API and a quoted name in the RateLimit-Policy field)", n)
	}
	return nil
}

func checkAddr(a string) error {
	if a == "" {
		return fmt.Errorf("required (host:port, e.g. 127.0.0.1:8080)")
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q: want host:port", a)
	}
	// Numeric: a port net.Listen refuses would fail the start, after
	// -check passed, without the file's line.
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q: want a number from 0 to 65535", a, port)
	}
	return nil
}
