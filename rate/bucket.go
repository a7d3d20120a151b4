package rate

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/counter"
)

// Inf is the rate of a bucket with no limit: every request is admitted and
// Burst is ignored.
const Inf = math.MaxFloat64

// ErrInvalidConfig is matched (errors.Is) by every error about a bad Config
// field or setter argument.
var ErrInvalidConfig = errors.New("invalid rate config")

// Config configures a Bucket. The zero Config is a bucket that admits
// nothing.
type Config struct {
	// Rate is the refill rate in tokens per second (events per second, or
	// bytes per second for a Reader or Writer). Inf (or +Inf) means no limit.
	// 0 means no refill: the bucket starts with Burst tokens and never gets
	// more. Must not be negative or NaN. Default 0.
	Rate float64
	// Burst is the bucket's capacity: the most tokens available at once and
	// the most a single request may take. A full bucket admits Burst events
	// at once. 0 admits nothing unless Rate is Inf. Must not be negative.
	// Default 0.
	Burst int
	// MaxWait bounds how long Wait, WaitN and Acquire wait for tokens: a
	// request whose tokens come later is rejected at once with
	// sluice.ReasonQueueTimeout, consuming nothing. 0 means only the
	// context's deadline bounds the wait. Must not be negative. Default 0.
	MaxWait time.Duration
}

func (c Config) validate() error {
	if err := validRate(c.Rate); err != nil {
		return err
	}
	if err := validBurst(c.Burst); err != nil {
		return err
	}
	if c.MaxWait < 0 {
		return fmt.Errorf("rate: Config.MaxWait is negative (%v): %w", c.MaxWait, ErrInvalidConfig)
	}
	return nil
}

func validRate(r float64) error {
	if math.IsNaN(r) || r < 0 {
		return fmt.Errorf("rate: Config.Rate must be >= 0, got %v: %w", r, ErrInvalidConfig)
	}
	return nil
}

func validBurst(b int) error {
	if b < 0 {
		return fmt.Errorf("rate: Config.Burst must be >= 0, got %d: %w", b, ErrInvalidConfig)
	}
	return nil
}

// Bucket is a token bucket. It is safe for concurrent use; the admission
// path takes no lock and does not allocate.
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
// under contention (a counter elsewhere nearly doubled the parallel cost).
type state struct {
	word     atomic.Int64  // E (modeRate) or tokens left (modeZero), or retired
	admitted atomic.Uint64 // admissions in this state; harvested bit once retired
	base     int64         // clock nanos that unit 0 stands for
	params                 // 56 bytes: the hot fields fill the first cache line
	_        [48]byte      // 128 bytes in all: the object owns its lines
}

// harvested marks a retired state's counter as moved to admittedOld.
const harvested = 1 << 62

// countAdmit counts one admission made on s.
func (b *Bucket) countAdmit(s *state) {
	if s == nil {
		b.c.Admit() // nothing taken (Inf, n <= 0): no state line is held
		return
	}
	if s.admitted.Add(1)&harvested != 0 {
		// s was retired and its count moved between our CAS and now.
		b.admittedOld.Add(1)
	}
}

// retire marks s replaced and returns its final word. Callers hold b.mu.
func (b *Bucket) retire(s *state) int64 {
	w := s.word.Swap(retired)
	b.admittedOld.Add(s.admitted.Swap(harvested))
	return w
}

// NewBucket returns a full bucket configured by cfg.
func NewBucket(cfg Config) (*Bucket, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bucket{}
	s := &state{params: compile(cfg), base: clock.Nanos()}
	s.word.Store(s.initial())
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

// units converts now (clock nanos) to units of s, or reports that s's base
// is too far from now.
func (s *state) units(now int64) (int64, bool) {
	if s.mode != modeRate {
		return 0, true // only the rate mode keeps time
	}
	off := satSub(now, s.base)
	if off > s.lim || off < -s.lim {
		return 0, false
	}
	return off << s.shift, true
}

const (
	// live, passed as now, makes takeNanos read the clock itself.
	live = math.MinInt64
	// noDeadline, passed as deadline, means no deadline.
	noDeadline = math.MaxInt64
)

// grant is the outcome of takeNanos.
type grant struct {
	wait   time.Duration // ok: before acting; !ok: until the tokens would be there, -1 never
	taken  int           // tokens taken: 0 under an infinite rate or for n <= 0
	ok     bool
	reason sluice.Reason // !ok: why
	s      *state        // ok: the state the tokens were taken from, for countAdmit
}

// takeNanos takes n tokens at now if they are there within maxWait and
// strictly before deadline (clock nanos). A request that is over maxWait
// is rejected with overWait; one that would come too late for the deadline
// with sluice.ReasonDeadline.
func (b *Bucket) takeNanos(now int64, n int, maxWait time.Duration, deadline int64, overWait sluice.Reason) grant {
	if n <= 0 {
		return grant{ok: true}
	}
	// The clock is read before the state, so that the window between
	// loading the word and the CAS is a few nanoseconds: under contention
	// a clock read inside it made most CASes fail. A CAS that fails is
	// retried at the same time. That time may be stale (the caller was
	// preempted, or lost CASes to callers with later readings); a stale
	// time can only see fewer tokens, so it never over-admits, but it
	// could wrongly reject. Hence a rejection whose state is ahead of our
	// reading (E > now: someone admitted at a later time, or reservations
	// are waiting) reads the clock once more and decides again. In the
	// common rejection (E <= now) a fresher reading could only add the
	// tokens of a few nanoseconds, so it is not worth another clock read.
	t, fresh := now, true
	if now == live {
		t, fresh = clock.Nanos(), false
	}
	for {
		s, w := b.load()
		if s.mode != modeInf && int64(n) > s.burst {
			return grant{wait: -1, reason: sluice.ReasonTooLarge}
		}
		u, in := s.units(t)
		if !in {
			b.rebase(s, t)
			continue
		}
		limit, why := maxWait, overWait
		if deadline != noDeadline {
			// At the deadline itself the context is already done.
			if rem := time.Duration(satSub(deadline, t)) - 1; rem < limit {
				limit, why = max(rem, 0), sluice.ReasonDeadline
			}
		}
		nw, wu, ok := s.take(w, u, int64(n), s.toUnits(int64(limit)))
		if !ok {
			if !fresh && s.mode == modeRate && w > u {
				t, fresh = clock.Nanos(), true
				continue
			}
			if wu < 0 {
				return grant{wait: -1, reason: sluice.ReasonRate}
			}
			return grant{wait: s.toDuration(wu), reason: why}
		}
		if s.mode == modeInf {
			return grant{ok: true}
		}
		if s.word.CompareAndSwap(w, nw) {
			return grant{wait: s.toDuration(wu), taken: n, ok: true, s: s}
		}
	}
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
		if s.word.CompareAndSwap(w, s.refund(w, int64(n))) {
			return
		}
	}
}

// Allow reports whether one token is available now, and takes it if so.
func (b *Bucket) Allow() bool { return b.allowNanos(live, 1) }

// AllowN reports whether n tokens are available now, and takes them if so.
// n > burst is never allowed (unless the rate is Inf); n <= 0 always is.
func (b *Bucket) AllowN(n int) bool { return b.allowNanos(live, n) }

// AllowAt is AllowN at time now.
func (b *Bucket) AllowAt(now time.Time, n int) bool { return b.allowNanos(at(now), n) }

func (b *Bucket) allowNanos(now int64, n int) bool {
	g := b.takeNanos(now, n, 0, noDeadline, sluice.ReasonRate)
	if g.ok {
		b.countAdmit(g.s)
	} else {
		b.c.Reject(g.reason)
	}
	return g.ok
}

// Tokens returns the tokens available now; negative while reservations
// are waiting for tokens not yet there.
func (b *Bucket) Tokens() float64 { return b.tokensNanos(clock.Nanos()) }

// TokensAt returns the tokens available at now.
func (b *Bucket) TokensAt(now time.Time) float64 { return b.tokensNanos(at(now)) }

func (b *Bucket) tokensNanos(now int64) float64 {
	for {
		s, w := b.load()
		u, in := s.units(now)
		if !in {
			b.rebase(s, now)
			continue
		}
		return s.tokens(w, u)
	}
}

// Config returns the bucket's current configuration.
func (b *Bucket) Config() Config {
	s, _ := b.load()
	return Config{Rate: s.rate, Burst: int(s.burst), MaxWait: s.maxWait}
}

// SetRate changes the rate at once. The tokens in the bucket (and any debt
// of waiting reservations) are kept; they refill at the new rate from now.
// Callers already waiting keep the wake-up time they were given.
func (b *Bucket) SetRate(r float64) error {
	if err := validRate(r); err != nil {
		return err
	}
	b.reconfigure(0, true, func(c *Config) { c.Rate = r })
	return nil
}

// SetRateAt is SetRate at time now: the new rate applies from now. Pass the
// latest time the bucket has seen: an earlier now re-rates the time in
// between, so tokens accrued then are counted again at the new rate.
func (b *Bucket) SetRateAt(now time.Time, r float64) error {
	if err := validRate(r); err != nil {
		return err
	}
	b.reconfigure(at(now), false, func(c *Config) { c.Rate = r })
	return nil
}

// SetBurst changes the burst at once. Tokens above the new burst are lost.
func (b *Bucket) SetBurst(n int) error {
	if err := validBurst(n); err != nil {
		return err
	}
	b.reconfigure(0, true, func(c *Config) { c.Burst = n })
	return nil
}

// SetBurstAt is SetBurst at time now; see SetRateAt about now.
func (b *Bucket) SetBurstAt(now time.Time, n int) error {
	if err := validBurst(n); err != nil {
		return err
	}
	b.reconfigure(at(now), false, func(c *Config) { c.Burst = n })
	return nil
}

// SetMaxWait changes Config.MaxWait for later waits.
func (b *Bucket) SetMaxWait(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("rate: Config.MaxWait is negative (%v): %w", d, ErrInvalidConfig)
	}
	b.reconfigure(0, true, func(c *Config) { c.MaxWait = d })
	return nil
}

// reconfigure replaces the current state by one with the edited config,
// carrying the tokens over at now (read from the clock under the lock when
// live, so that a setter's time is as late as possible: clock reads that
// raced ahead of it can only be a few nanoseconds later).
func (b *Bucket) reconfigure(now int64, live bool, edit func(*Config)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if live {
		now = clock.Nanos()
	}
	old, w := b.load()
	cfg := Config{Rate: old.rate, Burst: int(old.burst), MaxWait: old.maxWait}
	edit(&cfg)
	s := &state{params: compile(cfg), base: now}
	if old != &zeroState {
		w = b.retire(old)
	}
	var tk float64
	if u, in := old.units(now); in {
		tk = old.tokens(w, u)
	} else {
		// now is too far from the old base to convert: rebase the word
		// first (exact), then read it.
		tk = old.tokens(old.moved(w, now), 0)
	}
	if old.mode == modeInf && s.mode != modeInf {
		tk = float64(s.burst) // leaving Inf: start full, as a new bucket would
	}
	s.word.Store(s.fromTokens(tk, 0))
	b.st.Store(s)
}

// rebase moves the base of s to now, keeping its word exactly.
func (b *Bucket) rebase(s *state, now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st.Load() != s {
		return // a setter or another rebase got there first
	}
	ns := &state{params: s.params, base: now}
	w := b.retire(s)
	ns.word.Store(s.moved(w, now))
	b.st.Store(ns)
}

// moved returns word w of s re-expressed relative to base now.
func (s *state) moved(w int64, now int64) int64 {
	if s.mode != modeRate || w == eMin {
		return w
	}
	d := satSub(s.base, now) // ns from the new base to the old one
	return satAdd(w, satShl(d, s.shift))
}
