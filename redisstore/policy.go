package redisstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/counter"
)

// Failure is what a limiter decides when the store cannot answer (an
// error, the per-call timeout, the open breaker).
type Failure uint8

const (
	// FailOpen admits: the protected service prefers serving without a
	// shared limit to refusing traffic. The default. Its permits hold
	// nothing: a concurrency limit's Redis never counts the work they
	// admitted, also once it answers again.
	FailOpen Failure = iota
	// FailClosed rejects with sluice.ReasonStore (sluice.ErrStore, a
	// capacity rejection: HTTP 503).
	FailClosed
	// FailLocal decides with a limiter in the process at the shared limit
	// divided by the live replicas (Replicas, or the store's heartbeat
	// count), which is what the replicas together allow while Redis is
	// away, as long as the load balancer spreads the traffic evenly. When
	// the count changes, the limiter is resized, not replaced: the permits
	// it holds stay counted and its buckets keep their tokens. A
	// concurrency limit's local share also counts the leases this replica
	// still holds from Redis: their work runs on. And its permits are
	// leases too, held in the process until the first lease renewal that
	// Redis answers adds them (at most TTL/3 after it answers again and
	// the breaker has closed), so that the other replicas count them once
	// Redis is back; one released before that costs Redis nothing.
	FailLocal
)

func (f Failure) String() string {
	switch f {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return "unknown"
}

// ParseFailure reads a policy as a config file names it: "open", "closed"
// or "local" (Failure.String's words). Anything else is a *sluice.ConfigError
// naming the field "failure".
func ParseFailure(s string) (Failure, error) {
	for f := FailOpen; f <= FailLocal; f++ {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, sluice.NewConfigError("redisstore", "failure", s, `must be "open", "closed" or "local"`)
}

func (f Failure) check() error {
	if f > FailLocal {
		return sluice.NewConfigError("redisstore", "Failure", int(f), "must be FailOpen, FailClosed or FailLocal")
	}
	return nil
}

// counters are a limiter's decision counters, for its sluice.Stats (the
// root's striped counters, as every limiter's) and LimiterStats.
type counters struct {
	decisions counter.Counters
	fallbacks atomic.Uint64 // decisions made by the failure policy
	cacheHits atomic.Uint64 // rejections answered by the over-limit cache
	local     atomic.Uint64 // admissions from locally held batched tokens
}

func (c *counters) admit() { c.decisions.Admit() }

func (c *counters) reject(err error) error {
	c.decisions.Reject(sluice.ReasonOf(err))
	return err
}

func (c *counters) stats(limit float64, inFlight int) sluice.Stats {
	s := sluice.Stats{Limit: limit, InFlight: inFlight}
	c.decisions.Fill(&s)
	return s
}

// LimiterStats are a shared limiter's own counters, beyond sluice.Stats.
type LimiterStats struct {
	Fallbacks uint64 // decisions made by the failure policy, store unreachable
	CacheHits uint64 // rejections answered from the over-limit cache, no round trip
	Local     uint64 // admissions spent from locally held batched tokens
	Lost      uint64 // leases a renewal found gone from Redis (expired or lost by Redis while their holder ran) and added back, each time
	Renewals  uint64 // lease renewal script calls Redis answered (a call renews up to 250 leases of a set)
}

func (c *counters) limiterStats() LimiterStats {
	return LimiterStats{Fallbacks: c.fallbacks.Load(), CacheHits: c.cacheHits.Load(), Local: c.local.Load()}
}

// fail applies policy f to a decision the store could not make: admit
// with a permit that holds nothing (FailOpen), reject with ReasonStore and
// the breaker's cooldown as retry-after (FailClosed), or decide with the
// local limiter (FailLocal). The one place every limiter's policy lives.
func (c *counters) fail(f Failure, cooldown time.Duration, local func() (sluice.Permit, error)) (sluice.Permit, error) {
	c.fallbacks.Add(1)
	switch f {
	case FailClosed:
		return sluice.Permit{}, c.reject(sluice.Reject(sluice.ReasonStore, cooldown))
	case FailLocal:
		p, err := local()
		switch {
		case errors.Is(err, sluice.ErrRejected):
			return sluice.Permit{}, c.reject(err)
		case err != nil:
			// A wait its context ended is no rejection, as on the
			// store's own path: counted, it showed as reason unknown.
			return sluice.Permit{}, err
		}
		c.admit()
		return p, nil
	}
	c.admit()
	return sluice.Permit{}, nil
}

// localFor keeps the failure policy's local limiter, made at its first
// use and never made again: the replica count its limit is divided by may
// change while it holds permits or a bucket has spent tokens, which a new
// limiter would forget. Its users resize it to the current count instead
// (SetLimit keeps the permits held; SetRate and SetBurst keep the tokens).
type localFor[L any] struct {
	mu  sync.Mutex
	lim L
	ok  bool
}

func (l *localFor[L]) get(build func() (L, error)) (L, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ok {
		lim, err := build()
		if err != nil {
			return lim, err
		}
		l.lim, l.ok = lim, true
	}
	return l.lim, nil
}
