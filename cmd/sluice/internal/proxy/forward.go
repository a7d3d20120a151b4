package proxy

import (
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/httplimit"
)

// forwarding writes the forwarding headers the upstream sees. A chain a
// client sent is kept only when its TCP peer is one of
// client_ip.trusted_proxies: from anyone else it is a forgery, and the
// upstream (or the next sluice proxy, which trusts this one) would read a
// client address the client chose. Otherwise the chain is replaced by the
// peer's address, as httputil.ProxyRequest.SetXForwarded does.
type forwarding struct {
	ip        *httplimit.ClientIP // which peers are trusted, as the client_ip key reads them
	forwarded bool                // client_ip.header is Forwarded: write an RFC 7239 chain too
}

func newForwarding(ip ClientIPConfig) forwarding {
	cip, err := httplimit.NewClientIP(ip.httplimit())
	if err != nil { // validate checked the config
		panic(err)
	}
	return forwarding{ip: cip, forwarded: ip.Header == "Forwarded"}
}

// rewrite runs after SetXForwarded, which set X-Forwarded-For to the peer
// alone and X-Forwarded-Proto and -Host to this proxy's view of the
// request (ReverseProxy drops the inbound forwarding headers before
// Rewrite): from a trusted peer, its chain, scheme and host are kept.
func (f forwarding) rewrite(pr *httputil.ProxyRequest) {
	peer, trusted := f.ip.Peer(pr.In)
	if !trusted {
		// ReverseProxy drops only the X-Forwarded-* and Forwarded
		// headers: these other claims of a client address, from anyone
		// but a trusted proxy, are the client's own choice too.
		for _, h := range clientIPHeaders {
			pr.Out.Header.Del(h)
		}
	}
	if !peer.IsValid() {
		return // SetXForwarded wrote nothing either
	}
	if prior := pr.In.Header["X-Forwarded-For"]; trusted && len(prior) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+pr.Out.Header.Get("X-Forwarded-For"))
	}
	if trusted {
		// A trusted proxy (a TLS terminator) saw the client's scheme and
		// host; this proxy sees only its own hop, plain HTTP from it.
		for _, h := range []string{"X-Forwarded-Proto", "X-Forwarded-Host"} {
			if v := pr.In.Header[h]; len(v) > 0 {
				pr.Out.Header[h] = slices.Clone(v)
			}
		}
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

// clientIPHeaders are the headers besides X-Forwarded-For and Forwarded
// that CDNs and proxies use to pass the client's address on, and that
// upstreams read (nginx's realip module, frameworks' client-IP helpers).
var clientIPHeaders = []string{"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip", "X-Cluster-Client-Ip"}

// forwardedNode writes an address as RFC 7239 wants it: IPv6 quoted and
// in brackets.
func forwardedNode(a netip.Addr) string {
	if a.Is6() {
		return `"[` + a.String() + `]"`
	}
	return a.String()
}
