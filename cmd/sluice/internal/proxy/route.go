package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// route is a Route built: its matcher, its ReverseProxy and, with a
// policy, the httplimit middleware in front of it. Reloads keep a route
// whose definition (its spec, its policy's and the client-IP settings) did
// not change, with its connections to the upstream and its counters.
type route struct {
	name    string
	def     string
	spec    Route
	policy  *policy
	limit   *httplimit.Handler // nil without a policy
	handler http.Handler       // limit, or the upload watcher before the proxy
	metrics *routeMetrics
	peers   *httplimit.ClientIP // which peers are trusted proxies
}

func routeDefinition(r Route, p *policy, ip ClientIPConfig) string {
	b, err := json.Marshal(struct {
		Route  Route
		Policy string
		IP     ClientIPConfig
	}{r, policyDef(p), ip})
	if err != nil {
		panic(err) // plain values only
	}
	return string(b)
}

func policyDef(p *policy) string {
	if p == nil {
		return ""
	}
	return p.def
}

// buildRoute makes the route, with the transport tr (see transports).
func (c *Config) buildRoute(spec Route, at string, p *policy, tr *http.Transport, log *slog.Logger) (*route, error) {
	u, err := url.Parse(spec.Upstream)
	if err != nil { // validate parsed it already
		return nil, c.errAt(at+".upstream", "%v", err)
	}
	rt := &route{name: spec.Name, def: routeDefinition(spec, p, c.ClientIP), spec: spec, policy: p}
	fwd := newForwarding(c.ClientIP)
	rt.peers = fwd.ip
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // the upstream sees the name the client asked for
			pr.SetXForwarded()
			fwd.rewrite(pr) // a client's chain only from a trusted proxy
		},
		Transport:     tr,
		BufferPool:    copyBuffers,
		FlushInterval: spec.FlushInterval,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler:  upstreamError,
	}
	// Every route watches its uploads (upload.go), with or without a
	// policy: a client whose body is too slow or unreadable is answered
	// 408 or 400, not blamed on the upstream, and an upstream that stops
	// reading a body is cut off at the route's timeout.
	rp.ModifyResponse = upstreamAnswered
	var next http.Handler = boundUpload{next: rp, timeout: spec.Timeout}
	if p != nil && spec.OnClientGone == ClientGoneWait && p.countsInFlight() {
		next = waitForUpstream{next: rp, rt: rt}
	}
	rt.handler = next
	if p != nil {
		kf, err := keyFunc(p.spec.Key, spec.Name)
		if err != nil {
			return nil, c.errAt(at+".policy", "%v", err)
		}
		hc := httplimit.Config{
			Limiter:          p.global,
			Policy:           p.quota,
			DryRun:           p.spec.DryRun,
			MaxWait:          p.spec.MaxWait,
			MaxWaiting:       p.spec.MaxWaiting,
			MaxWaitingPerKey: p.spec.MaxWaitingPerKey,
			Outcome:          outcome,
			OnReject:         rejecter(p.spec.QuotaStatus, p.spec.CapacityStatus),
		}
		if p.perKey != nil {
			hc.PerKey = p.perKey
			hc.Key = kf
			if kf == nil {
				hc.ClientIP = c.ClientIP.httplimit()
			}
		}
		if rt.limit, err = httplimit.New(next, hc); err != nil {
			return nil, c.wrapAt(at+".policy", err)
		}
		rt.handler = rt.limit
	}
	return rt, nil
}

// transports hands out the upstream transports, one per route timeout,
// shared by the routes and by their versions across reloads: a reload keeps
// the connections to the upstreams, and a request still running on an old
// route returns its connection to a pool that lives on.
type transports struct {
	mu sync.Mutex
	m  map[time.Duration]*http.Transport
}

func (ts *transports) get(timeout time.Duration) *http.Transport {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if tr := ts.m[timeout]; tr != nil {
		return tr
	}
	// The dial and the TLS handshake come before ResponseHeaderTimeout
	// starts: bounded by the route's timeout too, an upstream whose SYNs
	// are dropped gets its 504 at the timeout the route was given, not
	// at the dialer's own.
	tr := &http.Transport{
		Proxy:                 nil, // never an environment proxy: the upstream is named in the file
		DialContext:           (&net.Dialer{Timeout: min(5*time.Second, timeout), KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		TLSHandshakeTimeout:   min(10*time.Second, timeout), // none by default: a stalled handshake would hold a request
		ExpectContinueTimeout: time.Second,
	}
	if ts.m == nil {
		ts.m = map[time.Duration]*http.Transport{}
	}
	ts.m[timeout] = tr
	return tr
}

// closeIdle closes the idle connections of every transport.
func (ts *transports) closeIdle() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, tr := range ts.m {
		tr.CloseIdleConnections()
	}
}

// copyBuffers are the ReverseProxy's body-copy buffers. Without a pool it
// allocates 32 KiB per request, which on a small heap means a collection
// every few dozen requests.
var copyBuffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// upstreamError answers a request the upstream did not: 504 when its
// headers did not come in time, 502 otherwise. Both are Dropped (see
// outcome). A client that went away gets nothing: nobody reads it, and
// httplimit counts its request as Ignore. A client whose upload failed
// gets 408 or 400, Ignore (upload.go).
func upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errClientGone) {
		return // the upstream answered; its status is the outcome
	}
	st := stateFrom(r.Context())
	if st == nil {
		http.Error(w, "upstream unavailable", http.StatusBadGateway) // serve always gives one
		return
	}
	if uerr := st.uploadFailed(); uerr != nil {
		// The client's upload failed, not the upstream: no 504 or
		// 502, no overload signal (upload.go).
		st.clientFault = true
		// A read that timed out ended the client's context as
		// net/http ends it for a client that left: answer it.
		if code, msg := uploadStatus(uerr); code == http.StatusRequestTimeout || !st.clientGone() {
			http.Error(w, msg, code)
		}
		return
	}
	code, msg := http.StatusBadGateway, "upstream unavailable"
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		code, msg = http.StatusGatewayTimeout, "upstream timed out"
	}
	// Its context may have ended with the client's deadline
	// (deadline_header) while the client still waits: answer it.
	if st.clientGone() {
		// With on_client_gone: wait the upstream request outlives
		// its client, so its failure is the upstream's, whether or
		// not the client's leaving was seen as abandoning it yet.
		if st.abandoned != nil && st.up.Load() != upAnswered {
			st.goneStatus = code
		}
		return
	}
	http.Error(w, msg, code)
}

// rejecter writes a rejection with the policy's statuses.
func rejecter(quota, capacity int) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		code := httplimit.Status(err)
		switch {
		case errors.Is(err, context.Canceled):
			return // the client left
		case code == http.StatusTooManyRequests:
			code = quota
		case code == http.StatusServiceUnavailable:
			code = capacity
		}
		msg := "over capacity"
		switch {
		case errors.Is(err, sluice.ErrQuota):
			msg = "over quota"
		case errors.Is(err, sluice.ErrStore):
			// A shared store's failure policy is closed: say so, so that
			// an operator tells it from an overloaded upstream.
			msg = "over capacity: the shared limit store did not answer (store failure policy: closed)"
		}
		http.Error(w, msg, code)
	}
}

// matches reports whether the route takes r; host is r's host, lower
// case, without its port.
func (rt *route) matches(r *http.Request, host string) bool {
	if rt.spec.Host != "" && rt.spec.Host != host {
		return false
	}
	if !strings.HasPrefix(r.URL.Path, rt.spec.PathPrefix) {
		return false
	}
	return len(rt.spec.Methods) == 0 || slices.Contains(rt.spec.Methods, r.Method)
}

// sortRoutes orders routes most specific first, so that the first match
// wins: a named host before any host, a longer path prefix before a
// shorter one, a method list before all methods; the file's order breaks
// ties.
func sortRoutes(rs []*route) {
	slices.SortStableFunc(rs, func(a, b *route) int {
		if (a.spec.Host == "") != (b.spec.Host == "") {
			if a.spec.Host != "" {
				return -1
			}
			return 1
		}
		if d := len(b.spec.PathPrefix) - len(a.spec.PathPrefix); d != 0 {
			return d
		}
		if (len(a.spec.Methods) == 0) != (len(b.spec.Methods) == 0) {
			if len(a.spec.Methods) != 0 {
				return -1
			}
			return 1
		}
		return 0
	})
}

func requestHost(r *http.Request) string {
	h := r.Host
	if hp, _, err := net.SplitHostPort(h); err == nil {
		h = hp
	} else if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1] // an IPv6 literal without a port
	}
	// "api.example.com." is the same name as "api.example.com".
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// cleanPath is p without dot segments and repeated slashes, as
// net/http.ServeMux cleans it, keeping a trailing slash; "*" (OPTIONS *)
// stays.
func cleanPath(p string) string {
	if p == "*" {
		return p
	}
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// checkRouteHost refuses a routes[].host that could never match: requests
// are matched by host without their port, so a host with a port would
// take none.
func checkRouteHost(h string) error {
	if hp, port, err := net.SplitHostPort(h); err == nil {
		return fmt.Errorf("%q has a port (%s): a route matches the request's host without its port, whatever the port; write %q", h, port, hp)
	}
	if strings.ContainsAny(h, "/ ") {
		return fmt.Errorf("%q is not a host name", h)
	}
	return nil
}

// statusClientGone is the metrics' and the access log's code of a request
// whose client went away before its answer was written (nginx's 499).
const statusClientGone = 499

// serve proxies r through the route, recording what happened.
func (rt *route) serve(w http.ResponseWriter, r *http.Request, access *slog.Logger) {
	client := r.Context()
	// Every request has its state in its context: the upload watcher and
	// upstreamError need it on a route without a policy too, whose state
	// holds no permits.
	st := &reqState{w: w, start: time.Now(), streamAfter: rt.spec.StreamAfter, ctx: client}
	ctx := st.withState()
	if rt.limit != nil {
		if a := rt.policy.spec.adaptive(); a != nil {
			st.dropAfter = a.Timeout
		}
		if d, ok := clientTimeout(r, rt.spec.DeadlineHeader); ok {
			_, trusted := rt.peers.Peer(r)
			var cancel context.CancelFunc
			ctx, cancel = st.withClientDeadline(ctx, d, trusted)
			defer cancel()
		}
	}
	r = r.WithContext(ctx)
	// Recorded in a defer: ReverseProxy panics with http.ErrAbortHandler
	// when the copy of a body fails part-way (the client or the upstream
	// went away), for net/http to close the connection, and that request
	// must be counted and logged all the same. The panic goes on.
	broke := true
	defer func() { rt.record(r, st, access, client, broke) }()
	rt.handler.ServeHTTP(st, r)
	broke = false
}

// record counts the request in the route's metrics and writes its access
// log line. broke: the handler did not return (a panic), so the answer,
// if begun, was cut off: recorded as 499 if the client went away (its
// context says so, or a write to it failed: ReverseProxy aborts on either
// side's failure, and net/http may not have cancelled the context yet),
// else as 502, the upstream's doing, whatever status line had gone out.
func (rt *route) record(r *http.Request, st *reqState, access *slog.Logger, client context.Context, broke bool) {
	dur := time.Since(st.start)
	status := st.status
	switch {
	case broke && (client.Err() != nil || st.writeFailed):
		status = statusClientGone
	case broke:
		status = http.StatusBadGateway
	case status != 0:
	case st.isLong():
		status = http.StatusSwitchingProtocols // hijacked
	case client.Err() != nil:
		status = statusClientGone
	default:
		status = http.StatusOK // nothing written: what net/http sends
	}
	rt.metrics.observe(status, dur)
	logAccess(access, r, rt.name, status, st.bytes, dur, st.isLong())
}

// logAccess writes r's access log line (access nil: no access log).
func logAccess(access *slog.Logger, r *http.Request, route string, status int, bytes int64, dur time.Duration, long bool) {
	if access == nil {
		return
	}
	access.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("route", route),
		slog.String("remote", r.RemoteAddr),
		slog.String("method", r.Method),
		slog.String("host", r.Host),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Int64("bytes", bytes),
		slog.Duration("duration", dur),
		slog.Bool("long_lived", long))
}

func (rt *route) String() string { return fmt.Sprintf("route %q", rt.name) }
