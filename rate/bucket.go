package rate

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/counter"
	"github.com/sluicehq/sluice/internal/gcra"
	"github.com/sluicehq/sluice/internal/waitrule"
)

// Inf is the rate of a bucket with no limit: every request is admitted and
// Burst is ignored.
const Inf = math.MaxFloat64

// Bucket is a token bucket. It is safe for concurrent use; the admission
// path takes no lock and does not allocate, except once when a contended
// bucket splits into stripes (see docs/design.md, section rate) and when a
// drained one, or a request for several tokens, joins them back.
//
// The zero Bucket admits nothing (rate 0, burst 0) until a setter changes it.
type Bucket struct {
	st atomic.Pointer[state]
	mu sync.Mutex // serializes setters and rebases; never held by Allow or Wait
	_  [64]byte   // keep the counters off the line Allow reads st from
	c  counter.Counters

	// admittedOld holds the admissions counted in retired states, and
	// those that land in a state after it was retired (see countAdmit).
	admittedOld atomic.Uint64
	waiting     atomic.Int64 // callers sleeping in Wait, for Stats.Queued
}

var _ sluice.Limiter = (*Bucket)(nil)

// state is a compiled config together with the one word of bucket state that
// goes with it. A setter never changes a state: it retires it (its word
// becomes retired, so every in-flight CAS on it fails) and publishes a new
// one, so an admission never mixes an old config with new state.
//
// A state's admission counter sits next to its word: the CAS that admits
// has just taken that cache line, so counting costs no extra line transfer
// under contention (a counter on its own line took a fifth of the time of a
// parallel Allow in the profile).
type state struct {
	word     atomic.Int64             // E (gcra.Rate) or tokens left (gcra.Zero), or retired
	admitted atomic.Uint64            // admissions in this state; harvested bit once retired
	base     int64                    // clock nanos that unit 0 stands for
	params                            // 64 bytes: the hot fields fill the first cache line
	ls       atomic.Pointer[leaseSet] // nil until contended (see lease.go)
	_        [32]byte                 // 128 bytes in all: the object owns its lines
}

// harvested marks a retired state's counter as moved to admittedOld.
const harvested = 1 << 62

// countAdmit counts one admission made on s (nil: no tokens were taken).
// Right after the CAS that admitted, s's line is still ours: count before
// doing anything else, or another core takes it back in between.
func (b *Bucket) countAdmit(s *state) {
	if s == nil {
		b.c.Admit() // nothing taken (Inf, n <= 0): no state line is held
		return
	}
	b.countIn(s)
}

// countIn counts one admission made on s, which is not nil.
func (b *Bucket) countIn(s *state) {
	if s.admitted.Add(1)&harvested != 0 {
		// s was retired and its count moved between our CAS and now.
		b.admittedOld.Add(1)
	}
}

// retire marks s replaced and returns its final word; with drain, it also
// empties its stripes and returns the tokens they held (see lease.go).
// Callers hold b.mu.
func (b *Bucket) retire(s *state, drain bool) (w, parked int64) {
	w = s.word.Swap(retired)
	if ls := s.ls.Load(); ls != nil && drain {
		parked = ls.drain()
	}
	b.admittedOld.Add(s.admitted.Swap(harvested))
	return w, parked
}

// NewBucket returns a full bucket configured by cfg.
func NewBucket(cfg Config) (*Bucket, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bucket{}
	s := &state{params: compile(cfg), base: clock.Nanos()}
	s.word.Store(s.Initial())
	b.st.Store(s)
	return b, nil
}

// load returns the current state and its word, waiting out the instant
// between a setter retiring a state and publishing the next.
func (b *Bucket) load() (*state, int64) {
	for {
		s := b.st.Load()
		if s == nil {
			return &zeroState, 0
		}
		if w := s.word.Load(); w != retired {
			return s, w
		}
		runtime.Gosched()
	}
}

// zeroState stands in for the state of a zero Bucket until a setter
// replaces it. It has burst 0, so nothing is ever taken from it or given
// back to it, and its word is never written.
var zeroState = state{params: compile(Config{})}

const (
	// live, passed as now, makes takeNanos read the clock itself.
	live = math.MinInt64
	// noDeadline, passed as deadline, means no deadline.
	noDeadline = waitrule.NoDeadline
)

// grant is the outcome of takeNanos.
type grant struct {
	wait   time.Duration // ok: before acting; !ok: until the tokens would be there, -1 never
	taken  int           // tokens taken: 0 under an infinite rate or for n <= 0
	ok     bool
	reason sluice.Reason // !ok: why
}

// takeNanos takes n tokens at now if they are there within maxWait and
// strictly before deadline (clock nanos). A request that is over maxWait
// is rejected with overWait; one that would come too late for the deadline
// with sluice.ReasonDeadline. It counts the rejection, and the admission
// if count is set (Wait counts its own, once the wait is over).
func (b *Bucket) takeNanos(now int64, n int, maxWait time.Duration, deadline int64, overWait sluice.Reason, count bool) grant {
	if n <= 0 {
		if count {
			b.countAdmit(nil)
		}
		return grant{ok: true}
	}
	// A CAS that fails is retried at the same time, so that the window
	// between loading the word and the CAS is a few nanoseconds: under
	// contention a clock read inside it made most CASes fail. That time is
	// then older than the word it is applied to, which may carry
	// admissions made at later times: it can only see fewer tokens, so it
	// never over-admits, but a rejection decided on it may be wrong by as
	// long as the caller was held up (a preempted goroutine: a time slice
	// or more). A rejection stands only when the reading was taken after
	// the word was loaded: at that load the bucket had no token, since it
	// had none even later, at the reading. Otherwise the caller loads the
	// word and reads the clock again. (An earlier rule trusted a stale
	// reading whose token was over 1 ms away; TestAllowNeverRefusesAFullBucket saw
	// preempted callers refused by a bucket that cannot run out.)
	//
	// A token from a lease (lease.go; single tokens at a live time) needs
	// no time at all, so the clock is read only once that has failed.
	t := now
	leased := n == 1 && now == live
	var (
		ls, tried *leaseSet // tried: the set whose stripe l was tried
		l         *lease
		empty     bool
	)
	if leased {
		// First the caller's stripe, reading no line that the word's CAS
		// writes: a leasing state's set is on its second line, and a
		// leasing burst is never too small for one token.
		if s := b.st.Load(); s != nil {
			if tried = s.ls.Load(); tried != nil {
				var ok bool
				if l, empty, ok = tried.take(false); ok {
					return b.leasedGrant(count)
				}
			}
		}
	}
	for {
		s, w := b.load()
		if s.Mode != gcra.Inf && int64(n) > s.burst {
			b.c.Reject(sluice.ReasonTooLarge)
			return grant{wait: -1, reason: sluice.ReasonTooLarge}
		}
		if ls = s.ls.Load(); leased && ls != nil && ls != tried {
			tried = ls
			var ok bool
			if l, empty, ok = ls.take(false); ok {
				return b.leasedGrant(count)
			}
		}
		after := t == live // the reading below follows the load of w
		if after {
			t = clock.Nanos()
		}
		u, in := s.Units(t, s.base)
		if !in {
			// t is too far from the base to count in its units.
			if nw, exact := s.Moved(w, s.base, t); exact {
				b.rebase(s, w, t, nw) // the same bucket, counted from t
				continue
			}
			if now == live && !after {
				t = live // as below: reject only on a reading after the load
				continue
			}
			if g, done := b.takeFar(s, w, t, n, leased, maxWait, deadline, overWait, count); done {
				return g
			}
			continue
		}
		limit, why := waitrule.Clamp(maxWait, overWait, t, deadline)
		nw, wu, ok := s.Take(w, u, int64(n), s.ToUnits(int64(limit)))
		if ls != nil && (!ok || wu > 0) && (now == live || ls.held() > 0 || int64(n) > s.Burst) {
			// The word cannot pay n at once, and
			//   - the time is live: the bucket is drained (see join);
			//   - or the stripes may hold what the word lacks;
			//   - or n is above the word's share, which the word never
			//     holds: AllowN of it was refused for ever.
			// So a refusal or a wait sees every parked token.
			t = b.join(t, now == live)
			continue
		}
		if !ok {
			if now == live && !after && s.Mode == gcra.Rate {
				t = live // decide again on a reading taken after the load
				continue
			}
			if wu < 0 { // never: rate 0 and too few tokens
				b.c.Reject(sluice.ReasonRate)
				return grant{wait: -1, reason: sluice.ReasonRate}
			}
			b.c.Reject(why)
			return grant{wait: s.ToDuration(wu), reason: why}
		}
		if s.Mode == gcra.Inf {
			if count {
				b.countAdmit(nil)
			}
			return grant{ok: true}
		}
		if leased && ls != nil && ls == tried && empty && wu <= 0 {
			g, ok, short := b.refill(s, w, u, ls, l, count)
			if ok {
				return g
			}
			if short { // drained: no lease until the word is plentiful
				t = b.join(t, true)
				continue
			}
		}
		if s.word.CompareAndSwap(w, nw) {
			if count {
				b.countAdmit(s)
			}
			return grant{wait: s.ToDuration(wu), taken: n, ok: true}
		}
		if leased {
			b.collided(s, w, u)
		}
	}
}

// takeFar is takeNanos at a time t so far from s's base that word w does
// not fit relative to it (only explicit times, or the clock after an
// explicit time moved the base, get there). Moving the base would then
// change the bucket, so it moves only to store an admission whose new word
// counts from t, and a rejection writes nothing (see gcra.TakeFar). done
// is false when the caller must decide again on the current state.
func (b *Bucket) takeFar(s *state, w, t int64, n int, leased bool, maxWait time.Duration, deadline int64, overWait sluice.Reason, count bool) (g grant, done bool) {
	limit, why := waitrule.Clamp(maxWait, overWait, t, deadline)
	nw, moved, wait, ok := s.TakeFar(w, s.base, t, int64(n), limit)
	if ls := s.ls.Load(); ls != nil && (!ok || wait > 0) {
		// The word alone cannot pay at once; the stripes may: a single
		// live token takes a parked one, a larger request joins them (a
		// setter's drain, at t) and decides anew, but only if they make
		// up the difference. A join re-expresses the bucket from its
		// tokens at t, and a debt too long for a word (the case that is
		// not full at t) would not survive it: so no join when drained,
		// unlike takeNanos.
		switch {
		case leased:
			if _, _, ok := ls.take(true); ok {
				return b.leasedGrant(count), true
			}
		case float64(n) <= s.TokensFar(w, s.base, t)+float64(ls.held()):
			b.join(t, false)
			return grant{}, false
		}
	}
	if !ok {
		b.c.Reject(why)
		return grant{wait: wait, reason: why}, true
	}
	if moved {
		ns, ok := b.rebase(s, w, t, nw)
		if !ok {
			return grant{}, false
		}
		s = ns
	} else if !s.word.CompareAndSwap(w, nw) {
		return grant{}, false
	}
	if count {
		b.countAdmit(s)
	}
	return grant{wait: wait, taken: n, ok: true}, true
}

// at converts an explicit time to clock nanos, keeping clear of live.
func at(t time.Time) int64 { return max(clock.FromTime(t), live+1) }

// give returns n tokens taken earlier.
func (b *Bucket) give(n int) {
	if n <= 0 {
		return
	}
	for {
		s, w := b.load()
		if s.ls.Load() != nil {
			b.giveLeased(int64(n))
			return
		}
		if s.word.CompareAndSwap(w, s.Refund(w, int64(n))) {
			return
		}
	}
}

// giveLeased is give to a bucket split into a word and stripes (lease.go).
// The word holds at most Burst−P tokens and clamps a refund to that, so a
// refund to the word alone was lost whenever the word was full: a token
// taken from a stripe and cancelled (sluice.All's refund) was gone. The
// tokens go to the stripes' room first, the rest to the word, whose clamp
// then drops only what the whole bucket has no room for. It holds b.mu so
// that no setter drains the stripes while it fills them: only the holder
// of b.mu retires a state.
func (b *Bucket) giveLeased(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, _ := b.load()
	if ls := s.ls.Load(); ls != nil {
		n = ls.put(n)
	}
	for n > 0 {
		s, w := b.load() // the same state: admissions move only its word
		if s.word.CompareAndSwap(w, s.Refund(w, n)) {
			return
		}
	}
}

// Allow reports whether one token is available now, and takes it if so.
func (b *Bucket) Allow() bool {
	// The common case, kept apart from takeNanos (which serves every
	// method, time and wait): a refilling bucket not split into stripes,
	// deciding one token now. It reads the clock and the word, and admits
	// with one CAS or rejects with no write to the word, as takeNanos would
	// in one pass; anything else (a CAS lost, a retired word, a base to
	// move, a rejection that may be stale) goes there. The word is loaded
	// once more before the clock: a rejection stands only if the word did
	// not move across the reading (see takeNanos), and in a rejection the
	// line is not written, so the second load hits the cache.
	// Half of what takeNanos cost beyond the clock read and the two atomics
	// was its generality (AMD EPYC VM, serial).
	if s := b.st.Load(); s != nil && s.Mode == gcra.Rate && s.burst > 0 && s.ls.Load() == nil {
		w0 := s.word.Load()
		t := clock.Nanos() // before the word that is CASed: see takeNanos
		if w := s.word.Load(); w != retired {
			if u, in := s.Units(t, s.base); in {
				nw, ok := s.TakeOne(w, u)
				switch {
				case ok && s.word.CompareAndSwap(w, nw):
					b.countIn(s)
					return true
				case ok:
					b.collided(s, w, u)
				case w == w0:
					b.c.Reject(sluice.ReasonRate)
					return false
				}
			}
		}
	}
	return b.allowNanos(live, 1)
}

// AllowN reports whether n tokens are available now, and takes them if so.
// n > burst is never allowed (unless the rate is Inf); n <= 0 always is.
func (b *Bucket) AllowN(n int) bool { return b.allowNanos(live, n) }

// AllowAt is AllowN at time now.
func (b *Bucket) AllowAt(now time.Time, n int) bool { return b.allowNanos(at(now), n) }

func (b *Bucket) allowNanos(now int64, n int) bool {
	return b.takeNanos(now, n, 0, noDeadline, sluice.ReasonRate, true).ok
}

// Tokens returns the tokens available now; negative while reservations
// are waiting for tokens not yet there.
func (b *Bucket) Tokens() float64 { return b.tokensNanos(clock.Nanos()) }

// TokensAt returns the tokens available at now. It changes nothing,
// however far now is from the times the bucket has seen.
func (b *Bucket) TokensAt(now time.Time) float64 { return b.tokensNanos(at(now)) }

// tokensNanos is a pure read: at a time far from the base it computes the
// tokens there rather than moving the base, which is exact only while the
// word fits relative to the new base (a read once moved it 72 h ahead of a
// 1e9/s bucket and left it an hour in debt).
func (b *Bucket) tokensNanos(now int64) float64 {
	tk, _ := b.read(now)
	return tk
}

// read returns the whole bucket's tokens at now and its compiled config,
// from one state, so a setter between the two cannot mix them. The
// state's Params are Compile(Rate, Burst) but for the burst of a split
// bucket's word (Burst−P, lease.go), which counts the same units a token:
// with the stripes' tokens added back, the whole bucket has its Burst.
func (b *Bucket) read(now int64) (float64, gcra.Params) {
	s, w := b.load()
	tk := s.TokensFar(w, s.base, now)
	p := s.Params
	if ls := s.ls.Load(); ls != nil {
		tk += float64(ls.held())
		p.Burst = s.burst
		p.Tau = p.Burst * p.Interval
	}
	return tk, p
}

// Remaining returns what is left of the bucket's quota now, for the IETF
// RateLimit field (httplimit.BucketRemaining reports it): the whole tokens
// in the bucket (none while reservations wait for tokens not yet there),
// and the time until it is full again at its rate, those reservations
// paid, rounded up to the nanosecond: 0 when full or under rate Inf (which
// has its Burst at once), -1 when it never refills (rate 0).
func (b *Bucket) Remaining() (remaining int, reset time.Duration) {
	return b.remainingNanos(clock.Nanos())
}

// RemainingAt is Remaining at time now. Like TokensAt, it changes nothing.
func (b *Bucket) RemainingAt(now time.Time) (remaining int, reset time.Duration) {
	return b.remainingNanos(at(now))
}

// remainingNanos compiles nothing: read gives the state's own Params.
func (b *Bucket) remainingNanos(now int64) (int, time.Duration) {
	tk, p := b.read(now)
	return p.Remaining(tk)
}
