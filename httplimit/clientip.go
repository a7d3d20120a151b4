package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// The request headers a trusted proxy may use to pass on the client address.
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded" // RFC 7239
)

// configErr is the error for a bad field: a *sluice.ConfigError, which
// matches sluice.ErrInvalidConfig. value is nil when the field is missing.
func configErr(field string, value any, allowed string) error {
	return sluice.NewConfigError("httplimit", field, value, allowed)
}

// IPConfig configures client-IP keys.
type IPConfig struct {
	// TrustedProxies lists the CIDR prefixes (or single addresses) of the
	// reverse proxies in front of this server. Only when the TCP peer is in
	// this list does the middleware read ProxyHeader, and then it walks the
	// header from the right, skipping trusted hops, and takes the first
	// untrusted address: the one a trusted proxy saw connect to it. Entries a
	// client wrote itself lie further left and are never reached.
	//
	// Default: empty, the header is never read and the key is the TCP peer
	// (RemoteAddr). A value that does not parse is a construction error.
	TrustedProxies []string

	// ProxyHeader names the header the trusted proxies write:
	// "X-Forwarded-For" (the default) or "Forwarded". Only one is read, since
	// a proxy that appends to one passes the other through from the client
	// untouched, and reading that one would let the client choose its key.
	ProxyHeader string

	// IPv6Prefix masks IPv6 keys to this many leading bits, so that a client
	// holding a whole /64 (a typical end-site allocation) cannot multiply its
	// quota by rotating addresses. Default 0: the whole address (128).
	// IPv4 addresses, and IPv4-mapped IPv6 ones, are never masked.
	IPv6Prefix int
}

// ClientIP finds the address of the client that sent a request. Build it
// with NewClientIP; the zero ClientIP keys by the TCP peer's whole address.
// It is safe for concurrent use.
type ClientIP struct {
	trusted  []netip.Prefix
	header   string // canonical header key; "" when no proxy is trusted
	v6prefix int    // bits kept of an IPv6 key; 0: all of them
}

// NewClientIP validates cfg and returns a ClientIP.
func NewClientIP(cfg IPConfig) (*ClientIP, error) { return newClientIP(cfg, "IPConfig.") }

// newClientIP is NewClientIP with the name of the field holding cfg, for
// error messages.
func newClientIP(cfg IPConfig, field string) (*ClientIP, error) {
	c := &ClientIP{}
	for i, s := range cfg.TrustedProxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, configErr(fmt.Sprintf("%sTrustedProxies[%d]", field, i), strconv.Quote(s), "must be a CIDR prefix or an IP address")
		}
		c.trusted = append(c.trusted, p)
	}
	switch http.CanonicalHeaderKey(cfg.ProxyHeader) {
	case "", HeaderXForwardedFor:
		c.header = HeaderXForwardedFor
	case HeaderForwarded:
		c.header = HeaderForwarded
	default:
		return nil, configErr(field+"ProxyHeader", strconv.Quote(cfg.ProxyHeader), "must be "+HeaderXForwardedFor+" or "+HeaderForwarded)
	}
	if len(c.trusted) == 0 {
		c.header = ""
	}
	if cfg.IPv6Prefix < 0 || cfg.IPv6Prefix > 128 {
		return nil, configErr(field+"IPv6Prefix", cfg.IPv6Prefix, "must be 0 (the whole address) or 1 to 128")
	}
	if cfg.IPv6Prefix < 128 {
		c.v6prefix = cfg.IPv6Prefix
	}
	return c, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (c *ClientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer returns the address of r's TCP peer (RemoteAddr, IPv4-mapped IPv6
// as IPv4, without a zone: as Addr reads it), invalid when RemoteAddr holds
// none, and whether it is one of TrustedProxies, whose forwarding header
// Addr believes. For a proxy that passes the header on: it should keep a
// chain only from a trusted peer, and replace it otherwise.
func (c *ClientIP) Peer(r *http.Request) (peer netip.Addr, trusted bool) {
	peer, ok := parseHop(r.RemoteAddr)
	return peer, ok && c.isTrusted(peer)
}

// Addr returns the client address of r, and false when RemoteAddr does not
// hold an IP address (a request not from a TCP peer, for example). The
// address is not masked; Key masks it.
func (c *ClientIP) Addr(r *http.Request) (netip.Addr, bool) {
	peer, trusted := c.Peer(r)
	if !peer.IsValid() {
		return netip.Addr{}, false
	}
	if c.header == "" || !trusted {
		return peer, true
	}
	// The peer is one of ours: walk its header from the right. Header lines
	// are in the order received, each appended by the next hop.
	client := peer
	lines := r.Header[c.header]
	var buf [8]string // the hops of one Forwarded line, most lines hold fewer
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if c.header == HeaderForwarded {
			hops, ok := forwardedHops(buf[:0], line)
			if !ok {
				// Unbalanced quotes: where the line's elements begin,
				// the last one, the nearest proxy's, included, is unknown.
				return client, true
			}
			for j := len(hops) - 1; j >= 0; j-- {
				var more bool
				if client, more = c.step(client, hops[j]); !more {
					return client, true
				}
			}
			continue
		}
		for line != "" {
			var hop string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				line, hop = line[:j], line[j+1:]
			} else {
				line, hop = "", line
			}
			var more bool
			if client, more = c.step(client, hop); !more {
				return client, true
			}
		}
	}
	return client, true
}

// step reads one hop of the walk in Addr, right to left: the hop's address
// and true when the walk goes on past it (a trusted proxy), or the address
// the walk ends at and false. A hop we cannot read ends the walk at client,
// the last address a trusted hop vouched for: never guess past it.
func (c *ClientIP) step(client netip.Addr, hop string) (netip.Addr, bool) {
	a, ok := parseHop(hop)
	if !ok {
		return client, false
	}
	return a, c.isTrusted(a)
}

// Key returns the client address of r as a string, with IPv6 masked to the
// configured prefix; it is a KeyFunc.
func (c *ClientIP) Key(r *http.Request) (string, bool) {
	a, ok := c.Addr(r)
	if !ok {
		return "", false
	}
	if a.Is6() && c.v6prefix > 0 {
		p, _ := a.Prefix(c.v6prefix) // cannot fail: 1 <= v6prefix < 128
		return p.String(), true
	}
	return a.String(), true
}

// parseHop reads one address as proxies write it: "1.2.3.4", "1.2.3.4:80",
// "2001:db8::1", "[2001:db8::1]:80", with surrounding spaces. IPv4-mapped
// IPv6 addresses become IPv4 and zones are dropped, so one client has one
// key.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		rest := s[end+1:]
		if rest != "" && (rest[0] != ':' || !isPort(rest[1:])) {
			return netip.Addr{}, false
		}
		s = s[1:end]
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.LastIndexByte(s, ':') == i {
		// Exactly one colon: IPv4 with a port (IPv6 has at least two).
		if !isPort(s[i+1:]) {
			return netip.Addr{}, false
		}
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// forwardedHops appends to dst the for= value of each forwarded-element of
// one RFC 7239 Forwarded line ("for=192.0.2.60;proto=http, for=10.0.0.1"),
// left to right, unquoted, "" for an element without one (an empty element
// too, which ends the walk as in X-Forwarded-For); obfuscated
// identifiers ("unknown", "_hidden") come back as they are and fail to
// parse as addresses. Commas and semicolons inside a quoted-string do not
// split: a proxy copies client input into quoted parameters (host="..."),
// and a client must not be able to forge an element there. It reports
// false, and appends nothing, when a quoted-string does not end: then no
// element boundary in the line can be trusted.
func forwardedHops(dst []string, line string) ([]string, bool) {
	if line == "" {
		return dst, true
	}
	n, pairStart := len(dst), 0
	forVal, found := "", false
	// pair closes the parameter line[pairStart:end], keeping the first
	// for= value of the element.
	pair := func(end int) {
		p := strings.TrimSpace(line[pairStart:end])
		pairStart = end + 1
		if eq := strings.IndexByte(p, '='); eq >= 0 && !found && strings.EqualFold(p[:eq], "for") {
			v := p[eq+1:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			forVal, found = v, true
		}
	}
	quoted := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quoted && ch == '\\':
			i++ // a quoted-pair: the next byte is literal
		case ch == '"':
			quoted = !quoted
		case quoted:
		case ch == ';':
			pair(i)
		case ch == ',':
			pair(i)
			dst = append(dst, forVal)
			forVal, found = "", false
		}
	}
	if quoted {
		return dst[:n], false
	}
	pair(len(line))
	return append(dst, forVal), true
}
