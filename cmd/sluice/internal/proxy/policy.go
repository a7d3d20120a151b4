package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/rate"
	"github.com/sluicehq/sluice/redisstore"
)

// maxWindow bounds burst/rate, the time an empty bucket takes to fill: the
// window of the RateLimit-Policy header. A bucket that in effect only
// drains (a total budget: rate 0.001, burst 1e6, 32 years) is a use, so the
// bound is the bucket's own, rate.MaxFill (36 years), not a month.
const maxWindow = rate.MaxFill

// fillError says why a bucket of burst at rate cannot be, or "" when it
// can: it would take longer than maxWindow to fill.
func fillError(rate float64, burst int) string {
	if secs := float64(burst) / rate; secs > maxWindow.Seconds() {
		return fmt.Sprintf("burst %d at rate %v/s takes %.4g years to fill; burst/rate must be at most %.4g years: raise rate or lower burst",
			burst, rate, secs/(365.25*86400), maxWindow.Hours()/(365.25*24))
	}
	return ""
}

// validateRate checks a policy's token bucket; at is the policy's path.
func (c *Config) validateRate(r *RateSpec, at string) error {
	if r == nil {
		return nil
	}
	if !(r.Rate > 0) || math.IsInf(r.Rate, 0) { // NaN too
		return c.errAt(at+".rate.rate", "must be > 0 requests per second and finite, got %v", r.Rate)
	}
	if r.Burst < 1 {
		return c.errAt(at+".rate.burst", "must be >= 1, got %d", r.Burst)
	}
	if msg := fillError(r.Rate, r.Burst); msg != "" {
		return c.errAt(at+".rate", "%s", msg)
	}
	return nil
}

// window is the time an empty bucket takes to fill, in whole seconds;
// validateRate bounded it.
func (r *RateSpec) window() time.Duration { return fillWindow(r.Rate, r.Burst) }

// fillWindow is the time an empty bucket of burst at rate takes to fill,
// in whole seconds: the RateLimit-Policy window.
func fillWindow(rate float64, burst int) time.Duration {
	return time.Duration(math.Ceil(float64(burst)/rate)) * time.Second
}

// RecommendedAlgorithm is what "algorithm" means when the file leaves it
// out: the adaptive package's recommended algorithm (adaptive.Little).
const RecommendedAlgorithm = "little"

// algorithms builds each adaptive algorithm from a policy's spec.
var algorithms = map[string]func(a *AdaptiveSpec) (adaptive.Algorithm, error){
	"little": func(a *AdaptiveSpec) (adaptive.Algorithm, error) {
		return adaptive.NewLittle(adaptive.LittleConfig{InitialLimit: a.InitialLimit, MinLimit: a.MinLimit, MaxLimit: a.MaxLimit, Timeout: a.Timeout})
	},
	"gradient2": func(a *AdaptiveSpec) (adaptive.Algorithm, error) {
		return adaptive.NewGradient2(adaptive.Gradient2Config{InitialLimit: a.InitialLimit, MinLimit: a.MinLimit, MaxLimit: a.MaxLimit, Timeout: a.Timeout})
	},
	"vegas": func(a *AdaptiveSpec) (adaptive.Algorithm, error) {
		return adaptive.NewVegas(adaptive.VegasConfig{InitialLimit: a.InitialLimit, MinLimit: a.MinLimit, MaxLimit: a.MaxLimit, Timeout: a.Timeout})
	},
	"aimd": func(a *AdaptiveSpec) (adaptive.Algorithm, error) {
		return adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: a.InitialLimit, MinLimit: a.MinLimit, MaxLimit: a.MaxLimit, Timeout: a.Timeout})
	},
}

func algorithmNames() string {
	var ns []string
	for n := range algorithms {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, ", ")
}

// policy is a Policy built from the library: the limiters and their state.
// Reloads keep a policy whose definition (def) did not change, so its
// tokens, adaptive limit and waiters survive.
type policy struct {
	name string
	def  string // the Policy as JSON, defaults filled in
	spec Policy

	bucket     *rate.Bucket         // rate, not per key
	conc       *concurrency.Limiter // concurrency, fixed or adaptive
	buckets    *keyed.Buckets       // rate per key
	perKeyConc *keyed.Map[*concurrency.Limiter]

	store      *store                  // nil: in the process (memory)
	sharedRate *redisstore.Buckets     // rate, global (one key) or per key
	sharedConc *redisstore.Concurrency // concurrency

	global sluice.Limiter  // every global limit at once; nil if none
	perKey httplimit.Keyed // every per-key limit at once; nil if none
	quota  *httplimit.RatePolicy

	collectors []*promsluice.Collector
}

func definition(p Policy) string {
	b, err := json.Marshal(p)
	if err != nil { // Policy holds only plain values
		panic(err)
	}
	return string(b)
}

// policyDefinition is what decides whether a reload keeps a policy: its
// spec and, if it lives in a store, the store's definition (a changed
// store is a new connection, so a new policy).
func policyDefinition(p Policy, st *store) string {
	if st == nil {
		return definition(p)
	}
	return definition(p) + " in " + st.def
}

// buildPolicy makes the limiters of p (defaults already filled in by
// validate) in st (nil: in the process); at is p's path in the file, for
// errors. A policy with a store must be closed (close) when dropped.
func (c *Config) buildPolicy(p Policy, at string, st *store) (*policy, error) {
	pol := &policy{name: p.Name, def: policyDefinition(p, st), spec: p, store: st}
	if st != nil {
		return c.buildShared(pol, at)
	}
	var globals []sluice.Limiter
	if r := p.Rate; r != nil {
		rc := r.bucketConfig() // validateRate checked it
		var err error
		if r.PerKey {
			pol.buckets, err = keyed.NewBuckets(keyed.BucketsConfig{Bucket: rc, MaxKeys: p.MaxKeys})
		} else {
			pol.bucket, err = rate.NewBucket(rc)
			var l sluice.Limiter = pol.bucket
			if r.MaxWait == 0 {
				l = noWait{l}
			}
			globals = append(globals, l)
		}
		if err != nil {
			return nil, c.wrapAt(at+".rate", err)
		}
		pol.quota = &httplimit.RatePolicy{
			Name:   p.Name,
			Quota:  r.Burst,
			Window: r.window(),
		}
		pol.quota.Remaining = pol.remaining
	}
	if cs := p.Concurrency; cs != nil {
		cc := concurrency.Config{Limit: cs.Limit, MaxQueue: cs.MaxQueue, MaxWait: cs.MaxWait, MaxWaitServices: cs.MaxWaitServices, Discipline: cs.Discipline}
		if a := cs.Adaptive; a != nil {
			alg, err := algorithms[a.Algorithm](a)
			if err != nil {
				return nil, c.wrapAt(at+".concurrency.adaptive", err)
			}
			cc.Algorithm = alg
		} else if cs.Limit < 1 || cs.Limit > concurrency.MaxLimit {
			return nil, c.errAt(at+".concurrency.limit", "must be within [1, %d], got %d", concurrency.MaxLimit, cs.Limit)
		}
		var err error
		if pol.conc, err = concurrency.New(cc); err != nil {
			return nil, c.wrapAt(at+".concurrency", err)
		}
		globals = append(globals, pol.conc)
	}
	if ks := p.PerKeyConcurrency; ks != nil {
		kc := concurrency.Config{Limit: ks.Limit, MaxQueue: ks.MaxQueue, MaxWait: ks.MaxWait}
		if ks.Limit < 1 || ks.Limit > concurrency.MaxLimit {
			return nil, c.errAt(at+".per_key_concurrency.limit", "must be within [1, %d], got %d", concurrency.MaxLimit, ks.Limit)
		}
		if _, err := concurrency.New(kc); err != nil {
			return nil, c.wrapAt(at+".per_key_concurrency", err)
		}
		var err error
		pol.perKeyConc, err = keyed.New(keyed.Config[*concurrency.Limiter]{
			New:     func(string) (*concurrency.Limiter, error) { return concurrency.New(kc) },
			MaxKeys: p.MaxKeys,
		})
		if err != nil {
			return nil, c.wrapAt(at+".per_key_concurrency", err)
		}
	}
	var buckets keyedLimiter
	if pol.buckets != nil {
		buckets = pol.buckets
	}
	return c.finish(pol, at, globals, buckets)
}

// finish composes a policy's limiters: the global ones all or nothing, the
// per-key ones likewise, and makes its collectors.
func (c *Config) finish(pol *policy, at string, globals []sluice.Limiter, buckets keyedLimiter) (*policy, error) {
	p := pol.spec
	switch len(globals) {
	case 0:
	case 1:
		pol.global = detaching{globals[0]}
	default:
		pol.global = detaching{sluice.All(globals...)}
	}
	if buckets != nil && p.Rate.MaxWait == 0 {
		buckets = noWaitKeyed{buckets}
	}
	switch {
	case buckets != nil && pol.perKeyConc != nil:
		pol.perKey = bothKeyed{buckets, pol.perKeyConc} // holds its permits in the request's state itself
	case buckets != nil:
		pol.perKey = detachingKeyed{buckets}
	case pol.perKeyConc != nil:
		pol.perKey = detachingKeyed{pol.perKeyConc}
	}
	if err := pol.newCollectors(); err != nil {
		pol.close()
		return nil, c.wrapAt(at+".name", err)
	}
	return pol, nil
}

// remaining is the RateLimit field of an admitted request: whole tokens
// left in its bucket, and the time until the bucket is full.
func (p *policy) remaining(key string) (int, time.Duration) {
	var tokens float64
	var cfg rate.Config
	if p.buckets != nil {
		tokens, cfg = p.buckets.Tokens(key), p.spec.Rate.bucketConfig()
	} else {
		tokens, cfg = p.bucket.Tokens(), p.bucket.Config()
	}
	tokens = max(tokens, 0)
	reset := time.Duration((float64(cfg.Burst) - tokens) / cfg.Rate * float64(time.Second))
	return int(tokens), max(reset, 0)
}

func (r *RateSpec) bucketConfig() rate.Config {
	return rate.Config{Rate: r.Rate, Burst: r.Burst, MaxWait: r.MaxWait}
}

// bothKeyed is a per-key token bucket and a per-key concurrency limit, all
// or nothing: the bucket first, so that a client over its rate never takes
// a concurrency slot. Its two permits are held in the request's state as a
// pair (reqState.holdPair), so that an admission allocates nothing of its
// own; sluice.All would be built per request, for the key (4 allocations).
type bothKeyed struct {
	b keyedLimiter
	c *keyed.Map[*concurrency.Limiter]
}

func (k bothKeyed) Acquire(ctx context.Context, key string) (sluice.Permit, error) {
	bp, err := k.b.Acquire(ctx, key)
	if err != nil {
		return sluice.Permit{}, err
	}
	cp, err := k.c.Acquire(ctx, key)
	if err != nil {
		bp.Cancel()
		return sluice.Permit{}, err
	}
	if st := stateFrom(ctx); st != nil {
		return st.holdPair(bp, cp), nil
	}
	return newPair(bp, cp), nil
}

// TryAcquire is for dry run, whose permits are held to the end: a pair of
// its own (one allocation).
func (k bothKeyed) TryAcquire(key string) (sluice.Permit, error) {
	bp, err := k.b.TryAcquire(key)
	if err != nil {
		return sluice.Permit{}, err
	}
	cp, err := k.c.TryAcquire(key)
	if err != nil {
		bp.Cancel()
		return sluice.Permit{}, err
	}
	return newPair(bp, cp), nil
}

// pair is two permits released as one, the later first.
type pair [2]sluice.Permit

func newPair(a, b sluice.Permit) sluice.Permit { return sluice.NewPermit(&pair{a, b}, 0) }

func (p *pair) Release(_ uint64, o sluice.Outcome, latency time.Duration) {
	p[1].Release(o, latency)
	p[0].Release(o, latency)
}

func (p *pair) Cancel(uint64) {
	p[1].Cancel()
	p[0].Cancel()
}

// noWait is a token bucket with max_wait 0: in the proxy that means a
// request without a token is refused at once, where the library's 0 means
// a wait bounded only by the request's context (the client's patience).
type noWait struct{ sluice.Limiter }

func (n noWait) Acquire(context.Context) (sluice.Permit, error) { return n.TryAcquire() }

type noWaitKeyed struct{ keyedLimiter }

func (n noWaitKeyed) Acquire(_ context.Context, key string) (sluice.Permit, error) {
	return n.TryAcquire(key)
}

// keyFunc returns the httplimit key of a policy's key spec, for the route
// named route; nil means the client IP (httplimit's default).
func keyFunc(spec, route string) (httplimit.KeyFunc, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "client_ip":
		if arg == "" {
			return nil, nil
		}
	case "header":
		if arg != "" && http.CanonicalHeaderKey(arg) != "" && !strings.ContainsAny(arg, " \t:") {
			return httplimit.HeaderKey(arg), nil
		}
		return nil, fmt.Errorf("%q: write header:NAME, e.g. header:X-API-Key", spec)
	case "route":
		if arg == "" {
			return func(*http.Request) (string, bool) { return route, true }, nil
		}
	case "method":
		if arg == "" {
			return httplimit.MethodKey, nil
		}
	}
	return nil, fmt.Errorf("%q: want client_ip, header:NAME, route or method", spec)
}

func parseKey(spec string) (httplimit.KeyFunc, error) { return keyFunc(spec, "") }
