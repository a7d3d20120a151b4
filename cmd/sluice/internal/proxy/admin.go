package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
)

// adminHandler is the admin API (see docs/proxy.md).
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /config", s.getConfig)
	mux.HandleFunc("GET /limits", s.getLimits)
	mux.HandleFunc("PUT /limits/{name}", s.putLimit)
	return mux
}

// getConfig answers the serving config as YAML (a valid config file, every
// default written out), preceded by comments saying where it came from and
// why the last reload was refused, if it was.
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	reloadErr, loaded := s.reloadErr, s.loaded
	s.mu.Unlock()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# file: %s\n# loaded: %s\n", s.path, loaded.UTC().Format(time.RFC3339))
	if reloadErr != nil {
		w.Header().Set("Sluice-Reload-Error", strings.ReplaceAll(reloadErr.Error(), "\n", "; "))
		fmt.Fprintf(&buf, "# last reload REFUSED, this config kept serving:\n")
		for _, l := range strings.Split(reloadErr.Error(), "\n") {
			fmt.Fprintf(&buf, "#   %s\n", l)
		}
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s.Config()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(buf.Bytes())
}

// limitsView is one policy in GET /limits.
type limitsView struct {
	Name              string     `json:"name"`
	Store             string     `json:"store"`
	DryRun            bool       `json:"dry_run"`
	Rate              *partView  `json:"rate,omitempty"`
	Concurrency       *partView  `json:"concurrency,omitempty"`
	PerKeyRate        *keyedView `json:"per_key_rate,omitempty"`
	PerKeyConcurrency *keyedView `json:"per_key_concurrency,omitempty"`
}

type partView struct {
	Limit    float64           `json:"limit"` // per second for a rate, in flight for a concurrency limit
	Burst    int               `json:"burst,omitempty"`
	Tokens   *float64          `json:"tokens,omitempty"`
	Adaptive string            `json:"adaptive,omitempty"`
	InFlight int               `json:"in_flight"`
	Queued   int               `json:"queued"`
	Admitted uint64            `json:"admitted"`
	Rejected map[string]uint64 `json:"rejected"`
}

type keyedView struct {
	partView
	Keys       int    `json:"keys"`
	MaxKeys    int    `json:"max_keys"`
	Evicted    uint64 `json:"evicted"`
	Overflowed uint64 `json:"overflowed"`
}

func part(s sluice.Stats) *partView {
	v := &partView{Limit: s.Limit, InFlight: s.InFlight, Queued: s.Queued, Admitted: s.Admitted, Rejected: map[string]uint64{}}
	for r, n := range s.Rejected {
		if n != 0 {
			v.Rejected[sluice.Reason(r).String()] = n
		}
	}
	return v
}

func keyedPart(s keyed.Stats) *keyedView {
	return &keyedView{partView: *part(s.Stats), Keys: s.Keys, MaxKeys: s.MaxKeys, Evicted: s.Evicted, Overflowed: s.Overflowed}
}

func (p *policy) view() limitsView {
	v := limitsView{Name: p.name, Store: p.spec.Store, DryRun: p.spec.DryRun}
	if p.bucket != nil {
		v.Rate = part(p.bucket.Stats())
		v.Rate.Burst = p.bucket.Config().Burst
		t := p.bucket.Tokens()
		v.Rate.Tokens = &t
	}
	if p.conc != nil {
		v.Concurrency = part(p.conc.Stats())
		if a := p.spec.adaptive(); a != nil {
			v.Concurrency.Adaptive = a.Algorithm
		}
	}
	if p.buckets != nil {
		v.PerKeyRate = keyedPart(p.buckets.Stats())
	}
	if p.perKeyConc != nil {
		v.PerKeyConcurrency = keyedPart(p.perKeyConc.Stats())
	}
	if p.sharedRate != nil {
		pv := part(p.sharedRate.Stats())
		pv.Burst = p.spec.Rate.Burst
		if p.spec.Rate.PerKey {
			v.PerKeyRate = &keyedView{partView: *pv, MaxKeys: p.spec.MaxKeys}
		} else {
			v.Rate = pv
		}
	}
	if p.sharedConc != nil {
		v.Concurrency = part(p.sharedConc.Stats())
	}
	return v
}

func (s *Server) getLimits(w http.ResponseWriter, r *http.Request) {
	st := s.cur.Load()
	out := make([]limitsView, 0, len(st.policyList))
	for _, p := range st.policyList {
		out = append(out, p.view())
	}
	writeJSON(w, http.StatusOK, out)
}

// maxLimitBody bounds the body of PUT /limits/NAME, a few fields.
const maxLimitBody = 1 << 16

// limitChange is the body of PUT /limits/NAME: the fields to change.
type limitChange struct {
	// Limit is the concurrency limit. With an adaptive algorithm it is
	// the current limit, which the algorithm moves on from.
	Limit *int `json:"limit"`
	// Rate and Burst are the token bucket's (a global one: per-key
	// buckets are changed by editing the file and reloading).
	Rate  *float64 `json:"rate"`
	Burst *int     `json:"burst"`
}

// putLimit changes a policy's limits at run time. The change is validated
// in full first: a bad value gets 400 naming the field and changes
// nothing. It lasts while the policy's definition in the file does not
// change (a reload keeps the policy, and so the change).
func (s *Server) putLimit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// The body is read before mu is taken: a client that sends it slowly,
	// or never, would otherwise hold up reloads, GET /config and Shutdown
	// for as long as it likes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLimitBody))
	if err != nil {
		// Past the bound the body is refused, not cut: what follows the
		// cut could be the rest of the change, or garbage.
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body", fmt.Sprintf("body: more than %d bytes", maxLimitBody))
			return
		}
		writeError(w, http.StatusBadRequest, "body", "body: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cur.Load().policies[name]
	if p == nil {
		writeError(w, http.StatusNotFound, "", fmt.Sprintf("no policy named %q", name))
		return
	}
	var ch limitChange
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ch); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		} else if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field = strings.Trim(f, `"`)
		}
		writeError(w, http.StatusBadRequest, field, "body: "+err.Error()+` (want e.g. {"limit": 50} or {"rate": 100, "burst": 200})`)
		return
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		// One JSON object and nothing after it: a body with more was
		// not written for this API, and half of it must not apply.
		writeError(w, http.StatusBadRequest, "body", `body: more than one JSON value (want one object, e.g. {"limit": 50})`)
		return
	}
	if field, msg := p.checkChange(ch); field != "" {
		writeError(w, http.StatusBadRequest, field, msg)
		return
	}
	field, err := p.apply(ch)
	if ch.Rate != nil || ch.Burst != nil {
		s.describeQuota(p) // the bucket as it is, changed or put back
	}
	if err != nil {
		// checkChange passed it, so a setter disagrees with it: a value
		// the setter refuses is still the input's fault (400), anything
		// else is ours.
		code := http.StatusInternalServerError
		if errors.Is(err, sluice.ErrInvalidConfig) && !errors.Is(err, errPartlyApplied) {
			code = http.StatusBadRequest
		}
		s.log.Error("limit change refused through the admin API", "policy", name, "field", field, "err", err)
		writeError(w, code, field, err.Error())
		return
	}
	s.log.Info("limits changed through the admin API", "policy", name, "limit", ch.Limit, "rate", ch.Rate, "burst", ch.Burst)
	writeJSON(w, http.StatusOK, p.view())
}

// errPartlyApplied is in apply's error when a change could not be undone.
var errPartlyApplied = errors.New("the change is partly applied")

// apply makes the change ch, which checkChange accepted, all or nothing,
// and returns the failing field with the error. The token bucket's rate
// and burst change in one SetLimits, which checks them as a pair: no
// request sees one new and the other old, and no order of two setters has
// to keep the pair between them valid. The concurrency limit, which
// checkChange bounds as its setter does, comes last; should it fail all
// the same, the bucket is put back (but for the tokens a lower burst
// dropped, which no setter gives back).
func (p *policy) apply(ch limitChange) (field string, err error) {
	var undo func() error
	if ch.Rate != nil || ch.Burst != nil {
		old := p.bucket.Config()
		r, b, f := old.Rate, old.Burst, "burst" // the field checkChange names for the pair
		if ch.Burst != nil {
			b = *ch.Burst
		}
		if ch.Rate != nil {
			r, f = *ch.Rate, "rate"
		}
		if err := p.bucket.SetLimits(r, b); err != nil {
			return f, err
		}
		undo = func() error { return p.bucket.SetLimits(old.Rate, old.Burst) }
	}
	if ch.Limit != nil {
		if err := p.conc.SetLimit(*ch.Limit); err != nil {
			if undo != nil {
				if uerr := undo(); uerr != nil {
					err = errors.Join(err, fmt.Errorf("%w: rate and burst could not be put back: %w", errPartlyApplied, uerr))
				}
			}
			return "limit", err
		}
	}
	return "", nil
}

// describeQuota makes the RateLimit-Policy field of p's routes, and of
// those a reload builds while p lasts, describe its bucket as it is now.
// Called with s.mu held, as Reload builds routes.
func (s *Server) describeQuota(p *policy) {
	cfg := p.bucket.Config()
	p.quota.Quota = cfg.Burst
	p.quota.Window = fillWindow(cfg.Rate, cfg.Burst)
	for _, rt := range s.cur.Load().routes {
		if rt.policy == p && rt.limit != nil {
			// Valid: checkChange bounded burst/rate as the file's are.
			_ = rt.limit.SetPolicy(p.quota.Quota, p.quota.Window)
		}
	}
}

// checkChange returns the first field of ch that p cannot take, and why.
func (p *policy) checkChange(ch limitChange) (field, msg string) {
	if ch.Limit == nil && ch.Rate == nil && ch.Burst == nil {
		return "body", "changes nothing: give limit, rate or burst"
	}
	if p.store != nil {
		return "body", fmt.Sprintf("policy %q is shared through store %q: change it in the file of every proxy that shares it, and reload", p.name, p.store.name)
	}
	if ch.Limit != nil {
		switch {
		case p.conc == nil:
			return "limit", fmt.Sprintf("policy %q has no concurrency limit", p.name)
		case *ch.Limit < 1 || *ch.Limit > concurrency.MaxLimit:
			return "limit", fmt.Sprintf("must be within [1, %d], got %d", concurrency.MaxLimit, *ch.Limit)
		}
	}
	if ch.Rate != nil || ch.Burst != nil {
		if p.bucket == nil {
			f := "rate"
			if ch.Rate == nil {
				f = "burst"
			}
			return f, fmt.Sprintf("policy %q has no global token bucket (per-key buckets change through the file)", p.name)
		}
	}
	if ch.Rate != nil && (*ch.Rate <= 0 || math.IsInf(*ch.Rate, 0) || math.IsNaN(*ch.Rate)) {
		return "rate", fmt.Sprintf("must be > 0 and finite, got %v", *ch.Rate)
	}
	if ch.Burst != nil && (*ch.Burst < 1) {
		return "burst", fmt.Sprintf("must be >= 1, got %d", *ch.Burst)
	}
	if ch.Rate != nil || ch.Burst != nil {
		// The pair as it would be, checked as the file's is.
		cur := p.bucket.Config()
		r, b, f := cur.Rate, cur.Burst, "burst"
		if ch.Burst != nil {
			b = *ch.Burst
		}
		if ch.Rate != nil {
			r, f = *ch.Rate, "rate"
		}
		if msg := fillError(r, b); msg != "" {
			return f, msg
		}
	}
	return "", ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, map[string]string{"field": field, "error": msg})
}
