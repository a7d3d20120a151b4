package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

// coreGate drives sluice's concurrency.Core — the same decision code as
// concurrency.Limiter — in virtual time, with a static limit or an adaptive
// algorithm.
type coreGate struct {
	e       *engine
	c       *concurrency.Core
	waiters map[concurrency.WaiterID]int32
}

func (p ConcurrencyPolicy) start(e *engine) (gate, error) {
	return newCoreGate(e, p.coreConfig(p.Limit))
}

func (p AdaptivePolicy) start(e *engine) (gate, error) {
	alg, err := newAlgorithm(&p)
	if err != nil {
		return nil, err
	}
	cfg := p.coreConfig(p.Limit)
	cfg.Algorithm = alg
	return newCoreGate(e, cfg)
}

func newCoreGate(e *engine, cfg concurrency.Config) (*coreGate, error) {
	c, err := concurrency.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	return &coreGate{e: e, c: c, waiters: make(map[concurrency.WaiterID]int32)}, nil
}

// algorithm is the adaptive algorithm the policy selects.
func (p *AdaptivePolicy) algorithm() AlgorithmKind {
	if p.Algorithm == "" {
		return Little
	}
	return p.Algorithm
}

// overrideLimits replaces an algorithm config's limits by the policy's
// Limit, MinLimit and MaxLimit, where those are set.
func (p *AdaptivePolicy) overrideLimits(initial, minL, maxL *int) {
	for _, o := range []struct {
		cfg *int
		v   int
	}{{initial, p.Limit}, {minL, p.MinLimit}, {maxL, p.MaxLimit}} {
		if o.v != 0 {
			*o.cfg = o.v
		}
	}
}

// algorithm is one adaptive algorithm an adaptive policy can select: its
// entry in algorithms.
type algorithm struct {
	// configured reports whether the policy sets this algorithm's config
	// field (which only a policy selecting it may do).
	configured func(p *AdaptivePolicy) bool
	// build makes the algorithm from the policy's config field, with the
	// policy's limits applied (overrideLimits).
	build func(p *AdaptivePolicy) (adaptive.Algorithm, error)
}

// algorithms is the registry of adaptive algorithms, by the name a
// scenario's algorithm field gives. Adding one is an entry here and its
// config field on AdaptivePolicy.
var algorithms = map[AlgorithmKind]algorithm{
	AIMD: {
		func(p *AdaptivePolicy) bool { return p.AIMD != (adaptive.AIMDConfig{}) },
		func(p *AdaptivePolicy) (adaptive.Algorithm, error) {
			c := p.AIMD
			p.overrideLimits(&c.InitialLimit, &c.MinLimit, &c.MaxLimit)
			return adaptive.NewAIMD(c)
		},
	},
	Vegas: {
		func(p *AdaptivePolicy) bool { return p.Vegas != (adaptive.VegasConfig{}) },
		func(p *AdaptivePolicy) (adaptive.Algorithm, error) {
			c := p.Vegas
			p.overrideLimits(&c.InitialLimit, &c.MinLimit, &c.MaxLimit)
			return adaptive.NewVegas(c)
		},
	},
	Little: {
		func(p *AdaptivePolicy) bool { return p.Little != (adaptive.LittleConfig{}) },
		func(p *AdaptivePolicy) (adaptive.Algorithm, error) {
			c := p.Little
			p.overrideLimits(&c.InitialLimit, &c.MinLimit, &c.MaxLimit)
			return adaptive.NewLittle(c)
		},
	},
	Gradient2: {
		func(p *AdaptivePolicy) bool { return p.Gradient2 != (adaptive.Gradient2Config{}) },
		func(p *AdaptivePolicy) (adaptive.Algorithm, error) {
			c := p.Gradient2
			p.overrideLimits(&c.InitialLimit, &c.MinLimit, &c.MaxLimit)
			return adaptive.NewGradient2(c)
		},
	},
}

// sortedAlgorithms lists the registry's names, sorted.
func sortedAlgorithms() []AlgorithmKind { return slices.Sorted(maps.Keys(algorithms)) }

// algorithmNames lists the registry's names for error messages.
func algorithmNames() string {
	names := make([]string, 0, len(algorithms))
	for _, k := range sortedAlgorithms() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// newAlgorithm builds the policy's algorithm; validate has checked that the
// name is in algorithms.
func newAlgorithm(p *AdaptivePolicy) (adaptive.Algorithm, error) {
	a, ok := algorithms[p.algorithm()]
	if !ok {
		return nil, fmt.Errorf("unknown algorithm %q (%s)", p.algorithm(), algorithmNames())
	}
	return a.build(p)
}

func (p *coreGate) arrive(now int64, id int32, r *request) {
	var deadline time.Time
	if r.deadline != never {
		deadline = p.e.t(r.deadline)
	}
	a, evs := p.c.Arrive(p.e.t(now), deadline)
	p.handle(evs)
	switch a.Verdict {
	case concurrency.Admitted:
		p.e.admit(id, r, a.Token)
	case concurrency.Queued:
		r.waiting = true
		r.handle = uint64(a.Waiter)
		p.waiters[a.Waiter] = id
		if a.ExpiresIn > 0 {
			p.e.wake(now + int64(a.ExpiresIn))
		}
	default:
		p.e.reject(id, r, a.Reason)
	}
}

// handle carries out the Core's events: waiters granted or rejected.
func (p *coreGate) handle(evs []concurrency.Event) {
	for _, ev := range evs {
		id, ok := p.waiters[ev.Waiter]
		if !ok {
			continue
		}
		delete(p.waiters, ev.Waiter)
		r := p.e.req(id)
		if ev.Admitted {
			p.e.admit(id, r, ev.Token)
		} else {
			p.e.reject(id, r, ev.Reason)
		}
	}
}

func (p *coreGate) release(now int64, _ int32, r *request, o sluice.Outcome, latency int64) {
	p.handle(p.c.Release(p.e.t(now), r.token, o, time.Duration(latency)))
	p.rearm()
}

func (p *coreGate) cancel(_ int64, _ int32, r *request) {
	w := concurrency.WaiterID(r.handle)
	p.c.Remove(w)
	delete(p.waiters, w)
}

func (p *coreGate) wake(now int64) {
	p.handle(p.c.Expire(p.e.t(now)))
	p.rearm()
}

// rearm asks for a wake at the queue head's expiry, so waits end on time
// even when no arrival or release comes to end them.
func (p *coreGate) rearm() {
	if at, ok := p.c.NextExpiry(); ok {
		p.e.wake(int64(at.Sub(p.e.t(0))))
	}
}

func (p *coreGate) limit() float64 { return float64(p.c.Limit()) }
func (p *coreGate) queued() int    { return p.c.Queued() }
