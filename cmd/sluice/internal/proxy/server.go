package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// state is one config, built: what a request is served by. A reload
// builds a new state and swaps it in; requests already in flight finish
// with the one they started with.
type state struct {
	cfg        *Config
	routes     []*route // most specific first
	policyList []*policy
	policies   map[string]*policy
	storeList  []*store
}

func (st *state) match(r *http.Request) *route {
	host := requestHost(r)
	for _, rt := range st.routes {
		if rt.matches(r, host) {
			return rt
		}
	}
	return nil
}

// build makes a state from cfg, reusing from old (may be nil) every
// store, policy and route whose definition did not change: the same
// objects, so their connections, limiter state and counters carry on.
// Nothing of old is changed; on an error, what build made is closed.
func build(cfg *Config, old *state, ts *transports, m *metrics, log *slog.Logger) (*state, error) {
	st := &state{cfg: cfg, policies: map[string]*policy{}}
	ok := false
	defer func() {
		if !ok {
			st.closeUnshared(old)
		}
	}()
	stores := map[string]*store{}
	for i, spec := range cfg.Stores {
		if s := old.store(spec.Name); s != nil && s.def == storeDefinition(spec) {
			stores[spec.Name] = s
			st.storeList = append(st.storeList, s)
			continue
		}
		s, err := cfg.openStore(spec, fmt.Sprintf("stores[%d]", i))
		if err != nil {
			return nil, err
		}
		stores[spec.Name] = s
		st.storeList = append(st.storeList, s)
	}
	for i, spec := range cfg.Policies {
		ps := stores[spec.Store] // nil: memory
		if old != nil {
			if p := old.policies[spec.Name]; p != nil && p.def == policyDefinition(spec, ps) && p.store == ps {
				st.policies[spec.Name] = p
				st.policyList = append(st.policyList, p)
				continue
			}
		}
		p, err := cfg.buildPolicy(spec, fmt.Sprintf("policies[%d]", i), ps)
		if err != nil {
			return nil, err
		}
		st.policies[spec.Name] = p
		st.policyList = append(st.policyList, p)
	}
	oldRoutes := map[string]*route{}
	if old != nil {
		for _, rt := range old.routes {
			oldRoutes[rt.name] = rt
		}
	}
	for i, spec := range cfg.Routes {
		p := st.policies[spec.Policy] // nil without a policy
		if rt := oldRoutes[spec.Name]; rt != nil && rt.def == routeDefinition(spec, p, cfg.ClientIP) && rt.policy == p {
			st.routes = append(st.routes, rt)
			continue
		}
		rt, err := cfg.buildRoute(spec, fmt.Sprintf("routes[%d]", i), p, ts.get(spec.Timeout), log)
		if err != nil {
			return nil, err
		}
		st.routes = append(st.routes, rt)
	}
	if m != nil {
		// Only now that nothing can fail: a refused config must not leave
		// series of routes that never served in /metrics.
		for _, rt := range st.routes {
			if rt.metrics == nil { // new; a kept route has its series
				rt.metrics = m.forRoute(rt.name)
			}
		}
	}
	sortRoutes(st.routes)
	ok = true
	return st, nil
}

// store returns st's store named name, nil if none (or st is nil).
func (st *state) store(name string) *store {
	if st == nil {
		return nil
	}
	for _, s := range st.storeList {
		if s.name == name {
			return s
		}
	}
	return nil
}

// closeUnshared closes st's policies and stores that other (may be nil)
// does not use too: after a reload, st is the old state and other the
// new one; after a failed build, st is the half-built one and other the
// serving one. Requests still running on st's policies end under their
// failure policy if their store is closed under them (a lease they hold
// expires after its TTL).
func (st *state) closeUnshared(other *state) {
	for _, p := range st.policyList {
		if other == nil || other.policies[p.name] != p {
			p.close()
		}
	}
	for _, s := range st.storeList {
		if other.store(s.name) != s {
			_ = s.s.Close() // only closing the client can fail: nothing to do about it
		}
	}
}

// Server is the proxy: its config, its listeners, its admin API. Make one
// with New; Serve runs it until Shutdown.
type Server struct {
	path    string
	log     *slog.Logger
	access  *slog.Logger // nil: no access log
	metrics *metrics
	noRoute *routeMetrics
	cur     atomic.Pointer[state]

	mu        sync.Mutex // one reload or limit change at a time
	reloadErr error      // the last reload's, nil if it succeeded; under mu
	retiring  []*retired // replaced states whose stores wait to be closed; under mu
	loaded    time.Time  // when the serving config was loaded; under mu
	modTime   time.Time  // the file's, when loaded; under mu
	size      int64

	srv, admin *http.Server
	// draining is set by Shutdown, under mu, so that a Reload (SIGHUP,
	// Watch) that comes after sees it and builds nothing: Shutdown has
	// closed, or is about to close, the stores and policies it would
	// reuse, and would not close the ones it made.
	maxConns   int // server.max_connections at New: Serve's listener's cap
	draining   atomic.Bool
	transports transports
	// pollChanged wakes Watch when a reload changed reload.poll.
	pollChanged chan struct{}
}

// New loads the config file at path and builds the proxy. log receives the
// proxy's log (nil: a text log on stderr per the file's log settings).
func New(path string, log *slog.Logger) (*Server, error) {
	fi, statErr := os.Stat(path)
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = NewLogger(os.Stderr, cfg.Log)
	}
	setRedisLog(log)
	s := &Server{path: path, log: log, loaded: time.Now(), pollChanged: make(chan struct{}, 1)}
	if statErr == nil {
		s.modTime, s.size = fi.ModTime(), fi.Size()
	}
	if cfg.Log.Access {
		s.access = log.With("log", "access")
	}
	s.metrics = newMetrics(s.cur.Load)
	s.noRoute = s.metrics.forRoute("")
	st, err := build(cfg, nil, &s.transports, s.metrics, log)
	if err != nil {
		return nil, err
	}
	s.cur.Store(st)
	s.metrics.reloaded(true)
	s.maxConns = cfg.Server.MaxConnections
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	s.admin = &http.Server{
		Handler: s.adminHandler(),
		// An admin request is small (a PUT body is at most 64 KiB): a
		// client that takes longer than this to send one is stalled, and
		// must not keep its connection and goroutine.
		ReadHeaderTimeout: adminReadTimeout,
		ReadTimeout:       adminReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
	}
	return s, nil
}

// adminReadTimeout bounds the time an admin API client may take to send a
// request, headers and body.
const adminReadTimeout = 10 * time.Second

// Config returns the serving config.
func (s *Server) Config() *Config { return s.cur.Load().cfg }

// ServeHTTP routes r.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := cleanPath(r.URL.Path); p != r.URL.Path {
		// Routes match the clean path, and the upstream gets that path:
		// /x/../expensive or //expensive must not pass a catch-all
		// route's limits to reach what the upstream serves as
		// /expensive.
		r.URL.Path, r.URL.RawPath = p, ""
	}
	rt := s.cur.Load().match(r)
	if rt == nil {
		// Counted and logged like any other request: route "".
		start := time.Now()
		const msg = "no route"
		http.Error(w, msg, http.StatusNotFound)
		dur := time.Since(start)
		s.noRoute.observe(http.StatusNotFound, dur)
		logAccess(s.access, r, "", http.StatusNotFound, int64(len(msg)+1), dur, false) // http.Error adds a newline
		return
	}
	rt.serve(w, r, s.access)
}

// ErrShuttingDown is Reload's error once Shutdown has begun.
var ErrShuttingDown = errors.New("sluice proxy: shutting down: config not reloaded")

// Reload reads the config file again and, if it is valid in full, serves
// it; otherwise the old config keeps serving and the error is returned,
// logged, shown by the admin API (GET /config) and counted in
// sluice_proxy_config_reloads_total{result="failure"}. Once Shutdown has
// begun it does nothing and returns ErrShuttingDown.
func (s *Server) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		s.log.Info("config reload skipped: shutting down", "file", s.path)
		return ErrShuttingDown
	}
	fi, statErr := os.Stat(s.path)
	err := s.reloadLocked()
	if statErr == nil {
		// Remember even a refused file's time, so that polling does not
		// retry it until it changes again.
		s.modTime, s.size = fi.ModTime(), fi.Size()
	}
	s.reloadErr = err
	s.metrics.reloaded(err == nil)
	if err != nil {
		s.log.Error("config reload refused; the old config keeps serving", "file", s.path, "err", err)
		return err
	}
	s.loaded = time.Now()
	s.log.Info("config reloaded", "file", s.path)
	return nil
}

func (s *Server) reloadLocked() error {
	cfg, err := LoadConfig(s.path)
	if err != nil {
		return err
	}
	old := s.cur.Load()
	st, err := build(cfg, old, &s.transports, s.metrics, s.log)
	if err != nil {
		return err
	}
	if cfg.Listen != old.cfg.Listen || cfg.Admin.Listen != old.cfg.Admin.Listen || cfg.Log != old.cfg.Log || cfg.Server != old.cfg.Server {
		s.log.Warn("listen, admin.listen, server and log take effect at the next start, not at a reload")
	}
	s.cur.Store(st)
	if cfg.Reload.Poll != old.cfg.Reload.Poll {
		select {
		case s.pollChanged <- struct{}{}:
		default: // Watch has yet to see the last change; it reads the new value
		}
	}
	s.retire(old, st)
	for _, rt := range old.routes {
		if !st.hasRoute(rt.name) {
			s.metrics.forget(rt.name)
		}
	}
	return nil
}

func (st *state) hasRoute(name string) bool {
	for _, rt := range st.routes {
		if rt.name == name {
			return true
		}
	}
	return false
}

// retired is a replaced state whose stores and shared policies a reload
// dropped, waiting to be closed.
type retired struct {
	old, cur *state
	timer    *time.Timer
}

// retire closes what old has and cur has not (stores, shared policies'
// lease renewal) drain_timeout after the reload, not at once: requests
// still running on old finish with them, renewing and releasing their
// leases, rather than failing to the failure policy or leaving a lease
// in Redis until its TTL. Shutdown closes them at once. Called under mu.
func (s *Server) retire(old, cur *state) {
	if len(old.storeList) == 0 {
		old.closeUnshared(cur) // nothing in the background but nothing shared either
		return
	}
	r := &retired{old: old, cur: cur}
	r.timer = time.AfterFunc(cur.cfg.DrainTimeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.retiring, r); i >= 0 { // else Shutdown closed it
			s.retiring = slices.Delete(s.retiring, i, i+1)
			r.old.closeUnshared(r.cur)
		}
	})
	s.retiring = append(s.retiring, r)
}

// Watch polls the config file's modification time and size every
// reload.poll and reloads when they change, until ctx ends. Like the rest
// of the file, reload.poll applies on reload: a SIGHUP that sets it
// starts the polling (Watch waits for one while it is 0s), changes its
// period or stops it. One Watch at a time.
func (s *Server) Watch(ctx context.Context) {
	var (
		poll time.Duration
		t    *time.Ticker
		tick <-chan time.Time // nil while poll is 0: never
	)
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if p := s.Config().Reload.Poll; p != poll {
			poll = p
			switch {
			case p <= 0:
				t.Stop() // p differs from poll, which was > 0: t exists
				tick = nil
			case t == nil:
				t = time.NewTicker(p)
				tick = t.C
			default:
				t.Reset(p)
				tick = t.C
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.pollChanged:
			continue
		case <-tick:
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			continue
		}
		s.mu.Lock()
		changed := !fi.ModTime().Equal(s.modTime) || fi.Size() != s.size
		s.mu.Unlock()
		if changed {
			_ = s.Reload() // logged and recorded by Reload
		}
	}
}

// Serve serves proxied requests on ln and the admin API on adminLn until
// Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve(ln, adminLn net.Listener) error {
	limited, err := limitConns(ln, s.maxConns)
	if err != nil { // validate checked the limit
		ln.Close()
		adminLn.Close()
		return err
	}
	ln = limited
	errc := make(chan error, 2)
	go func() { errc <- s.admin.Serve(adminLn) }()
	go func() { errc <- s.srv.Serve(ln) }()
	var first error
	for range 2 {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			s.srv.Close()
			s.admin.Close()
		}
	}
	return first
}

// Shutdown stops accepting connections, waits for the requests in flight
// to finish (at most drain_timeout, or until ctx ends), then closes the
// admin API. It returns an error if requests were still running when the
// time was up; those connections are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock() // waits for a reload under way; any later one sees draining
	s.draining.Store(true)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.Config().DrainTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	s.admin.Close()
	s.transports.closeIdle()
	s.mu.Lock()
	for _, r := range s.retiring {
		r.timer.Stop()
		r.old.closeUnshared(r.cur)
	}
	s.retiring = nil
	s.cur.Load().closeUnshared(nil)
	s.mu.Unlock()
	return err
}

// Check builds cfg's policies and routes as a start would, and returns
// the first error: the library's own checks (a limit out of range, say),
// named at file:line: field. LoadConfig does not build anything.
func Check(cfg *Config) error {
	st, err := build(cfg, nil, &transports{}, nil, slog.New(slog.DiscardHandler))
	if err == nil {
		st.closeUnshared(nil)
	}
	return err
}

// LogStart logs where the proxy listens, and whether its admin API is
// reachable from other hosts.
func LogStart(log *slog.Logger, path string, addr, admin net.Addr) {
	loopback := false
	if ta, ok := admin.(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	if loopback {
		log.Info("sluice proxy started", "config", path, "listen", addr.String(), "admin", admin.String(), "admin_scope", "loopback only")
	} else {
		log.Warn("sluice proxy started; the admin API is NOT on loopback: anyone who reaches it can change limits", "config", path, "listen", addr.String(), "admin", admin.String(), "admin_scope", "network")
	}
}
