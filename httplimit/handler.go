package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
)

// Handler is the middleware: it admits each request through the configured
// limiters, serves it with the next handler, and releases the permits with
// the outcome of the work. Make one with New; it is safe for concurrent use.
type Handler struct {
	next     http.Handler
	limiter  sluice.Limiter
	perKey   Keyed
	key      KeyFunc
	fallback string
	onReject func(http.ResponseWriter, *http.Request, error)
	outcome  func(*http.Request, int) sluice.Outcome
	dryRun   bool
	noWait   bool // TryAcquire only: NoWait or DryRun
	poolWait bool // the limiters are the library's: wait contexts may be pooled
	waiters  waiters

	policyField atomic.Pointer[[]string] // RateLimit-Policy value, len == cap so appends copy; nil: none
	policy      RatePolicy               // as compiled, for SetPolicy
	policyName  string                   // quoted, for the RateLimit field
	remaining   func(string) (int, time.Duration)

	admitted    atomic.Uint64
	rejected    [sluice.NumReasons]atomic.Uint64
	wouldReject [sluice.NumReasons]atomic.Uint64
	canceled    atomic.Uint64
	errs        atomic.Uint64
	perKeyRej   atomic.Uint64
	fallbacks   atomic.Uint64
	outcomes    [sluice.Ignore + 1]atomic.Uint64
}

// New returns next wrapped in the middleware. It validates cfg: an error
// is a *sluice.ConfigError that names the field.
func New(next http.Handler, cfg Config) (*Handler, error) {
	if next == nil {
		return nil, configErr("next", nil, "the handler to wrap must not be nil")
	}
	if cfg.Limiter == nil && cfg.PerKey == nil {
		return nil, configErr("Config.Limiter", nil, "Limiter or PerKey must be set: nothing would be limited")
	}
	// A nil pointer in the interface is not nil: every request would panic.
	if nilPointer(cfg.Limiter) {
		return nil, configErr("Config.Limiter", fmt.Sprintf("a nil %T", cfg.Limiter), "must be a limiter; leave the field nil for no global limit")
	}
	if nilPointer(cfg.PerKey) {
		return nil, configErr("Config.PerKey", fmt.Sprintf("a nil %T", cfg.PerKey), "must be a per-key limiter; leave the field nil for no per-key limit")
	}
	h := &Handler{
		next:     next,
		limiter:  cfg.Limiter,
		perKey:   cfg.PerKey,
		onReject: cfg.OnReject,
		outcome:  cfg.Outcome,
		dryRun:   cfg.DryRun,
		noWait:   cfg.NoWait || cfg.DryRun,
		poolWait: ownLimiter(cfg.Limiter) && ownLimiter(cfg.PerKey),
	}
	var err error
	if err = h.waiters.init(&cfg); err != nil {
		return nil, err
	}
	if cfg.PerKey != nil {
		if h.key, err = cfg.keyFunc(); err != nil {
			return nil, err
		}
		if h.fallback, err = cfg.fallbackKey(); err != nil {
			return nil, err
		}
	} else if cfg.Key != nil || cfg.ipSet() {
		return nil, configErr("Config.PerKey", nil, "must be set when Key or ClientIP is: there is nothing to key")
	}
	if h.onReject == nil {
		h.onReject = WriteRejection
	}
	if cfg.Policy != nil {
		field, name, err := cfg.Policy.compile()
		if err != nil {
			return nil, err
		}
		h.policyField.Store(&[]string{field})
		h.policy, h.policyName = *cfg.Policy, name
		h.remaining = cfg.Policy.Remaining
	}
	return h, nil
}

// SetPolicy changes the quota and window of the RateLimit-Policy field,
// for a rate limit changed at run time (the bucket's Burst and Burst/Rate,
// see RatePolicy). It returns a *sluice.ConfigError and changes nothing
// when they are invalid or the Handler was built without a Policy.
func (h *Handler) SetPolicy(quota int, window time.Duration) error {
	if h.policyField.Load() == nil {
		return configErr("Config.Policy", nil, "is not set: there is no RateLimit-Policy field to change")
	}
	p := h.policy
	p.Quota, p.Window = quota, window
	field, _, err := p.compile()
	if err != nil {
		return err
	}
	h.policyField.Store(&[]string{field})
	return nil
}

// ServeHTTP admits r or rejects it; see Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f := h.policyField.Load(); f != nil {
		w.Header()[headerPolicy] = *f
	}
	key, kp, gp, err := h.acquire(r)
	if err != nil && !h.reject(w, r, err) {
		return
	}
	// Admitted, or in dry run, served without permits.
	h.serve(w, r, key, &kp, &gp, err == nil)
}

// acquire takes the per-key permit, then the global one; when the global
// limiter says no, the per-key permit is cancelled so that the client's
// quota does not pay for the server's overload (in dry run it is kept: the
// request is served, and holds what it was granted). In dry run a per-key
// rejection does not stop it asking the global limiter: the request will
// be served, and a concurrency limit must see it in flight.
func (h *Handler) acquire(r *http.Request) (key string, kp, gp sluice.Permit, err error) {
	if h.perKey != nil {
		var ok bool
		if key, ok = h.key(r); !ok {
			key = h.fallback
			h.fallbacks.Add(1)
		} else if len(key) > MaxKeyLen {
			key = digestKey(key)
		}
	}
	ctx := r.Context()
	if !h.noWait {
		slot, err := h.waiters.enter(key)
		if err != nil {
			return key, kp, gp, err
		}
		defer h.waiters.leave(slot)
		wc := newWaitCtx(ctx, h.waiters.maxWait, h.poolWait)
		defer wc.free()
		ctx = wc
	}
	if h.perKey != nil {
		if h.noWait {
			kp, err = h.perKey.TryAcquire(key)
		} else {
			kp, err = h.perKey.Acquire(ctx, key)
			err = timedOut(r.Context(), ctx, err)
		}
		if err != nil {
			if isRejection(err) {
				err = &Rejection{Err: err, PerKey: true, Key: key}
			}
			if !h.dryRun { // in dry run it is served, an error too
				return key, kp, gp, err
			}
		}
	}
	if h.limiter != nil {
		var gerr error
		gp, gerr = h.acquireGlobal(r.Context(), ctx, &kp)
		if gerr != nil {
			if !h.dryRun {
				kp.Cancel() // not served: the key's quota keeps it
			} // in dry run it is served, and its key's limits see it
			if isRejection(gerr) {
				gerr = &Rejection{Err: gerr, Key: key}
			}
			if err == nil { // a per-key rejection (dry run) is the one counted
				err = gerr
			}
		}
	}
	return key, kp, gp, err
}

// acquireGlobal asks the global limiter. The limiter is the application's
// code, held to no contract about panics: if it panics (or calls
// runtime.Goexit), kp is cancelled as the panic goes by, since the work
// never ran; kept, it would hold the key's slot or token for good.
func (h *Handler) acquireGlobal(req, wait context.Context, kp *sluice.Permit) (p sluice.Permit, err error) {
	returned := false
	defer func() {
		if !returned {
			kp.Cancel()
		}
	}()
	if h.noWait {
		p, err = h.limiter.TryAcquire()
	} else {
		p, err = h.limiter.Acquire(wait)
		err = timedOut(req, wait, err)
	}
	returned = true
	return p, err
}

func isRejection(err error) bool { return errors.Is(err, sluice.ErrRejected) }

// reject counts and answers a request that was not admitted. It returns true
// when the request should be served anyway (dry run).
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, err error) bool {
	var re *sluice.RejectError
	if !errors.As(err, &re) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The wait ended with the request's context (the client
			// left, or a deadline upstream passed): not a rejection.
			h.canceled.Add(1)
		} else {
			h.errs.Add(1) // say, a keyed.Map whose New failed
			if h.dryRun {
				return true // dry run admits every request
			}
		}
		h.onReject(w, r, err)
		return false
	}
	if h.dryRun {
		h.wouldReject[counted(re.Reason)].Add(1)
		return true
	}
	h.rejected[counted(re.Reason)].Add(1)
	if rj, ok := err.(*Rejection); ok && rj.PerKey {
		h.perKeyRej.Add(1)
	}
	setRejectHeaders(w.Header(), re.RetryAfter, Status(err), h.policyName)
	h.onReject(w, r, err)
	return false
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, key string, kp, gp *sluice.Permit, admitted bool) {
	h.admitted.Add(1)
	sw := &statusWriter{ResponseWriter: w}
	start := clock.Nanos()
	o := sluice.Ignore
	// Deferred, and armed before any code that is not ours runs, so that
	// the permits come back however the request ends: a panic (or
	// runtime.Goexit) in the handler, in Remaining or in Outcome leaves
	// the outcome at Ignore.
	defer func() {
		lat := time.Duration(clock.Nanos() - start)
		gp.Release(o, lat)
		kp.Release(o, lat)
		h.outcomes[o].Add(1)
	}()
	if admitted && h.remaining != nil {
		n, reset := h.remaining(key)
		w.Header()[headerRateLimit] = []string{rateLimitField(h.policyName, n, reset)}
	}
	h.next.ServeHTTP(sw, r)
	o = h.classify(r, sw)
}

func (h *Handler) classify(r *http.Request, sw *statusWriter) sluice.Outcome {
	if sw.hijacked {
		return sluice.Ignore
	}
	switch ctx := r.Context(); ctx.Err() {
	case nil:
	case context.DeadlineExceeded:
		// A plain deadline (context.WithDeadline: the cause is
		// DeadlineExceeded itself) is the server's or a trusted
		// proxy's: the work outlasted it, overload. One that ended with
		// a cause of its own is the application's to judge (a timeout
		// a client sent, say): by its answer, as without the deadline,
		// or any client could shrink a limit all clients share.
		if context.Cause(ctx) == context.DeadlineExceeded {
			return sluice.Dropped
		}
	default:
		return sluice.Ignore // the client left: says nothing
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if h.outcome != nil {
		if o := h.outcome(r, status); o <= sluice.Ignore {
			return o
		}
		return sluice.Ignore // not an outcome
	}
	if status >= 500 {
		return sluice.Dropped
	}
	return sluice.Success
}

// Stats is a snapshot of the middleware's counters.
type Stats struct {
	// Requests counts requests that went through admission: admitted,
	// rejected, canceled or failed (it is their sum, not a counter of
	// its own, to keep one atomic add off the request path).
	Requests uint64
	// Admitted counts requests passed to the next handler (in dry run,
	// every request whose wait did not end with its context).
	Admitted uint64
	// Rejected counts rejections by reason; index it with a sluice.Reason.
	Rejected [sluice.NumReasons]uint64
	// RejectedPerKey counts the rejections (included in Rejected) that
	// came from the per-key limiter: clients over their own share, as
	// opposed to a server at capacity.
	RejectedPerKey uint64
	// WouldReject counts, in dry run, the requests that would have been
	// rejected, by reason. They are also counted in Admitted.
	WouldReject [sluice.NumReasons]uint64
	// Canceled counts requests whose wait for admission ended with their
	// context; they were neither admitted nor rejected.
	Canceled uint64
	// Errors counts requests for which a limiter failed with an error
	// that is neither a rejection nor the context's (a keyed.Map whose New
	// failed); they are answered 503, or in dry run served (and counted in
	// Admitted too).
	Errors uint64
	// FallbackKeys counts requests for which Key found no usable key.
	FallbackKeys uint64
	// Waiting is the number of requests waiting for admission now, at
	// most Config.MaxWaiting.
	Waiting int
	// Succeeded, Dropped and Ignored count admitted requests by the
	// outcome their permits were released with.
	Succeeded, Dropped, Ignored uint64
}

// Stats returns the middleware's counters.
func (h *Handler) Stats() Stats {
	s := Stats{
		Admitted:       h.admitted.Load(),
		Canceled:       h.canceled.Load(),
		Errors:         h.errs.Load(),
		RejectedPerKey: h.perKeyRej.Load(),
		FallbackKeys:   h.fallbacks.Load(),
		Waiting:        int(h.waiters.total.Load()),
		Succeeded:      h.outcomes[sluice.Success].Load(),
		Dropped:        h.outcomes[sluice.Dropped].Load(),
		Ignored:        h.outcomes[sluice.Ignore].Load(),
	}
	for i := range s.Rejected {
		s.Rejected[i] = h.rejected[i].Load()
		s.WouldReject[i] = h.wouldReject[i].Load()
	}
	s.Requests = s.Admitted + s.RejectedTotal() + s.Canceled
	if !h.dryRun {
		s.Requests += s.Errors // in dry run they were served: in Admitted
	}
	return s
}

// RejectedTotal is the sum of Rejected over all reasons.
func (s Stats) RejectedTotal() uint64 { return sum(s.Rejected) }

// WouldRejectTotal is the sum of WouldReject over all reasons.
func (s Stats) WouldRejectTotal() uint64 { return sum(s.WouldReject) }

func sum(a [sluice.NumReasons]uint64) uint64 {
	var n uint64
	for _, v := range a {
		n += v
	}
	return n
}

// counted is the reason a rejection is counted under: a foreign Limiter's
// reason beyond sluice's own is unknown, as sluice.All counts it (wrapped
// around, it would be counted as another reason).
func counted(r sluice.Reason) sluice.Reason {
	if r >= sluice.NumReasons {
		return sluice.ReasonUnknown
	}
	return r
}

// nilPointer reports whether v holds a nil pointer: an interface value
// that is not nil but whose methods would dereference nil.
func nilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
