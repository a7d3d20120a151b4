package sluice

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"time"
)

// All returns a Limiter that admits only when every one of ls admits, in
// order. When a later limiter rejects (or the context ends while waiting for
// it, or it fails or panics), the permits the earlier ones granted are
// cancelled, so a per-key rate limit does not lose tokens because a global
// concurrency limit said no.
//
// A rejection is the rejecting limiter's error, unchanged: its reason, its
// Quota (429 or 503) and its retry-after hint. The limiters after it were
// not asked, so a retry after the hint may still meet one of them.
//
// Put the cheap, non-waiting limiters first: a rate limit before a
// concurrency limit with a queue means a caller that would be rate limited
// never takes a queue slot.
//
// Releasing the returned permit releases the parts in reverse order with the
// same outcome and latency; a part whose Release or Cancel panics does not
// keep the other parts' permits (the panic goes on after they are given
// back).
//
// A nil Limiter in ls, or a nil pointer to one, is no limit and is
// skipped, so an optional limit can be left nil. A limiter given more than once is asked once, at its first
// place: one request must not hold two of its slots or tokens, nor wait in
// its queue for a slot it holds itself. (Limiters are told apart with ==; a
// value of a type == cannot compare is always kept.)
func All(ls ...Limiter) Limiter {
	a := &all{ls: make([]Limiter, 0, len(ls))}
	for _, l := range ls {
		if !isNil(l) && !slices.ContainsFunc(a.ls, func(k Limiter) bool { return same(k, l) }) {
			a.ls = append(a.ls, l)
		}
	}
	return a
}

// isNil reports whether l is nil or holds a nil pointer (var b
// *rate.Bucket left unset): either would panic at the first call.
func isNil(l Limiter) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// same reports whether a and b are the same limiter: ==, but false rather
// than a panic for values of a type == cannot compare.
func same(a, b Limiter) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

type all struct {
	ls       []Limiter
	inFlight atomic.Int64
	admitted atomic.Uint64
	rejected [NumReasons]atomic.Uint64
}

// multi holds the parts' permits; small compositions fit in the inline array
// so that an admission costs one allocation.
type multi struct {
	a     *all
	n     int
	small [4]Permit
	more  []Permit
}

func (m *multi) parts() []Permit {
	if m.more != nil {
		return m.more
	}
	return m.small[:m.n]
}

// newMulti returns the holder of the parts' permits by value: acquire fills
// it on the stack and moves it to the heap only once every part has
// admitted, so a rejection — the common answer under overload — allocates
// nothing here.
func (a *all) newMulti() multi {
	m := multi{a: a}
	if len(a.ls) > len(m.small) {
		m.more = make([]Permit, 0, len(a.ls))
	}
	return m
}

func (m *multi) add(p Permit) {
	if m.more != nil {
		m.more = append(m.more, p)
		return
	}
	m.small[m.n] = p
	m.n++
}

func (m *multi) Release(_ uint64, o Outcome, latency time.Duration) {
	defer m.a.inFlight.Add(-1)
	finish(m.parts(), false, o, latency)
}

// finish releases ps (or cancels them, with cancel) from the last to the
// first. A part whose Release or Cancel panics (any Limiter may be a
// part) does not keep the earlier parts' permits: a server that recovers
// the panic would lose those slots and tokens for good. The rest are given
// back while the panic unwinds, and it goes on after them unchanged. (No
// func value: one would make the permits escape, and a rejection
// allocate.)
func finish(ps []Permit, cancel bool, o Outcome, latency time.Duration) {
	i := len(ps) - 1
	defer func() {
		if i >= 0 {
			finish(ps[:i], cancel, o, latency) // ps[i] panicked
		}
	}()
	for ; i >= 0; i-- {
		if cancel {
			ps[i].Cancel()
		} else {
			ps[i].Release(o, latency)
		}
	}
}

func (a *all) Acquire(ctx context.Context) (Permit, error) {
	return a.acquire(func(l Limiter) (Permit, error) { return l.Acquire(ctx) })
}

func (a *all) TryAcquire() (Permit, error) {
	return a.acquire(Limiter.TryAcquire)
}

func (a *all) acquire(get func(Limiter) (Permit, error)) (Permit, error) {
	m := a.newMulti()
	// A part that panics (any Limiter may be a part) must not keep the
	// earlier parts' permits: a server that recovers the panic would lose
	// those slots and tokens for good.
	done := false
	defer func() {
		if !done {
			m.cancelParts()
		}
	}()
	for _, l := range a.ls {
		p, err := get(l)
		if err != nil {
			m.cancelParts()
			done = true
			// A cancelled wait is not a rejection; a reason beyond
			// NumReasons (a foreign Limiter's) must not index past the
			// array: it counts as unknown, so that every rejection counts.
			if r, ok := reasonOf(err); ok {
				if int(r) >= len(a.rejected) {
					r = ReasonUnknown
				}
				a.rejected[r].Add(1)
			}
			return Permit{}, err
		}
		m.add(p)
	}
	done = true
	a.admitted.Add(1)
	a.inFlight.Add(1)
	held := new(multi)
	*held = m
	return NewPermit(held, 0), nil
}

// Cancel gives back every part's grant: the work never ran.
func (m *multi) Cancel(uint64) {
	defer m.a.inFlight.Add(-1)
	m.cancelParts()
}

// cancelParts gives back the permits granted so far, in reverse order.
func (m *multi) cancelParts() { finish(m.parts(), true, 0, 0) }

// Stats reports the composition's own counters: admissions of the whole,
// rejections by the reason the rejecting part gave (a reason this version
// does not know counts as ReasonUnknown; a cancelled wait is not counted),
// permits of the whole in flight, and callers queued in any part. Limit is
// 0: the parts' limits are in different units; read them from the parts.
func (a *all) Stats() Stats {
	s := Stats{InFlight: int(a.inFlight.Load()), Admitted: a.admitted.Load()}
	for i := range a.rejected {
		s.Rejected[i] = a.rejected[i].Load()
	}
	for _, l := range a.ls {
		s.Queued += l.Stats().Queued
	}
	return s
}
