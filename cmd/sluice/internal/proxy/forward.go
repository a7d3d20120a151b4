package proxy

import (
	"net/http/httputil"
	"net/netip"
	"strings"
)

// forwarding writes the forwarding headers the upstream sees. A chain a
// client sent is kept only when its TCP peer is one of
// client_ip.trusted_proxies: from anyone else it is a forgery, and the
// upstream (or the next sluice proxy, which trusts this one) would read a
// client address the client chose. Otherwise the chain is replaced by the
// peer's address, as httputil.ProxyRequest.SetXForwarded does.
type forwarding struct {
	trusted   []netip.Prefix
	forwarded bool // client_ip.header is Forwarded: write an RFC 7239 chain too
}

func newForwarding(ip ClientIPConfig) forwarding {
	f := forwarding{forwarded: ip.Header == "Forwarded"}
	for _, s := range ip.TrustedProxies {
		if p, err := parsePrefix(s); err == nil { // validate checked them
			f.trusted = append(f.trusted, p.Masked())
		}
	}
	return f
}

// rewrite runs after SetXForwarded, which set X-Forwarded-For to the peer
// alone (ReverseProxy drops the inbound forwarding headers before Rewrite).
func (f forwarding) rewrite(pr *httputil.ProxyRequest) {
	peer, ok := peerAddr(pr.In.RemoteAddr)
	if !ok {
		return // SetXForwarded wrote nothing either
	}
	trusted := f.isTrusted(peer)
	if prior := pr.In.Header["X-Forwarded-For"]; trusted && len(prior) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+pr.Out.Header.Get("X-Forwarded-For"))
	}
	if !f.forwarded {
		return
	}
	proto := "http"
	if pr.In.TLS != nil {
		proto = "https"
	}
	elem := "for=" + forwardedNode(peer) + ";proto=" + proto
	if prior := pr.In.Header["Forwarded"]; trusted && len(prior) > 0 {
		elem = strings.Join(prior, ", ") + ", " + elem
	}
	pr.Out.Header.Set("Forwarded", elem)
}

func (f forwarding) isTrusted(a netip.Addr) bool {
	for _, p := range f.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the address of a request's TCP peer, IPv4-mapped IPv6 as
// IPv4 (as httplimit reads it), without its zone.
func peerAddr(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// forwardedNode writes an address as RFC 7239 wants it: IPv6 quoted and
// in brackets.
func forwardedNode(a netip.Addr) string {
	if a.Is6() {
		return `"[` + a.String() + `]"`
	}
	return a.String()
}
