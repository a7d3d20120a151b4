package rate

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/gcra"
)

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
	// at once. 0 admits nothing unless Rate is Inf; NewBucket refuses 0
	// at a rate between (a Burst left out, see ValidOpen), and SetBurst(0)
	// closes a live bucket. Must not be negative,
	// nor take longer than MaxFill (36 years) to fill at Rate, nor be more
	// than the bucket can count at Rate (never above 2^60, about 1.15e18),
	// unless Rate is 0 or slower than a token per MaxFill (see ValidFill).
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
	if err := ValidOpen(c.Rate, c.Burst); err != nil {
		return err
	}
	if err := ValidFill(c.Rate, c.Burst); err != nil {
		return err
	}
	return validMaxWait(c.MaxWait)
}

// MaxFill is the longest an empty bucket can take to fill, Burst/Rate:
// 2^60 ns, about 36.5 years, the time a bucket counts in its 60 bits. A
// bucket that refills slower than one token per MaxFill is counted as one
// that never refills (within its horizon it does not).
const MaxFill = time.Duration(gcra.MaxTau)

// ValidFill returns a *sluice.ConfigError on Config.Burst when a bucket of
// burst at rate gets tokens back within MaxFill but cannot count its
// refill: it takes longer than MaxFill to fill (rate 10 with burst 2e10
// would never refill), or its burst is too large to count at that rate.
// A bucket counts its fill time in at most 2^60 units of time, each token
// taking a whole number of units (the unit is finer for a smaller burst,
// down to 2^-30 ns), so Burst can never exceed 2^60 (about 1.15e18), and a
// burst near MaxFill can be refused where its interval rounds up.
func ValidFill(rate float64, burst int) error {
	horizon := MaxFill.Seconds()
	if rate > 1/horizon && rate < math.MaxFloat64 && float64(burst)/rate > horizon {
		return sluice.NewConfigError("rate", "Config.Burst", burst, fmt.Sprintf(
			"at Rate %v/s takes %.4g years to fill; Burst/Rate must be at most MaxFill, %.4g years: lower Burst or raise Rate",
			rate, float64(burst)/rate/(365.25*86400), horizon/(365.25*86400)))
	}
	if !gcra.Countable(rate, int64(burst)) {
		return sluice.NewConfigError("rate", "Config.Burst", burst, fmt.Sprintf(
			"at Rate %v/s is more tokens than the bucket can count: Burst times the interval between tokens, in whole units of time, must fit in 2^60 units; lower Burst",
			rate))
	}
	return nil
}

// A bad field or setter argument is a *sluice.ConfigError (it matches
// sluice.ErrInvalidConfig).
func validMaxWait(d time.Duration) error {
	if d < 0 {
		return sluice.NewConfigError("rate", "Config.MaxWait", d, "must be >= 0 (0: only the context's deadline bounds a wait)")
	}
	return nil
}

func validRate(r float64) error {
	if math.IsNaN(r) || r < 0 {
		return sluice.NewConfigError("rate", "Config.Rate", r, "must be >= 0 (+Inf for no limit)")
	}
	return nil
}

// ValidOpen returns a *sluice.ConfigError on Config.Burst for a new
// bucket that refills but can never hold a token: Burst 0 at a rate above
// 0 and below Inf, almost always a Burst left out (Config{Rate: 100}), which
// would refuse every request, for ever, as too large. A closed bucket is
// Config{} (or SetBurst(0) on a live one); NewBucket refuses the rest.
func ValidOpen(rate float64, burst int) error {
	if burst == 0 && rate > 0 && rate < math.MaxFloat64 { // Inf is MaxFloat64
		return sluice.NewConfigError("rate", "Config.Burst", burst, fmt.Sprintf(
			"must be >= 1 at Rate %v/s: a bucket of burst 0 holds no token and refuses every request (for a closed bucket, Rate 0)", rate))
	}
	return nil
}

func validBurst(b int) error {
	if b < 0 {
		return sluice.NewConfigError("rate", "Config.Burst", b, "must be >= 0")
	}
	return nil
}

// Config returns the bucket's current configuration.
func (b *Bucket) Config() Config {
	s, _ := b.load()
	return Config{Rate: s.rate, Burst: int(s.burst), MaxWait: s.maxWait}
}

// SetRate changes the rate at once. The tokens in the bucket (and any debt
// of waiting reservations) are kept; they refill at the new rate from now.
// Callers already waiting keep the wake-up time they were given: after a
// decrease they act on the old schedule, so for the length of the longest
// pending wait the bucket can admit up to (old−new)·that wait more than
// the new rate allows.
func (b *Bucket) SetRate(r float64) error {
	if err := validRate(r); err != nil {
		return err
	}
	return b.reconfigure(0, true, func(c *Config) { c.Rate = r })
}

// SetRateAt is SetRate at time now: the new rate applies from now. Pass the
// latest time the bucket has seen: an earlier now re-rates the time in
// between, so tokens accrued then are counted again at the new rate.
func (b *Bucket) SetRateAt(now time.Time, r float64) error {
	if err := validRate(r); err != nil {
		return err
	}
	return b.reconfigure(at(now), false, func(c *Config) { c.Rate = r })
}

// SetBurst changes the burst at once. Tokens above the new burst are lost.
func (b *Bucket) SetBurst(n int) error {
	if err := validBurst(n); err != nil {
		return err
	}
	return b.reconfigure(0, true, func(c *Config) { c.Burst = n })
}

// SetBurstAt is SetBurst at time now; see SetRateAt about now.
func (b *Bucket) SetBurstAt(now time.Time, n int) error {
	if err := validBurst(n); err != nil {
		return err
	}
	return b.reconfigure(at(now), false, func(c *Config) { c.Burst = n })
}

// SetLimits changes the rate and the burst together, in one step: no
// admission sees one of them new and the other old, and the pair is
// checked as a whole, as NewBucket checks a Config. (SetRate and SetBurst
// each check the new value against the other field as it stands, so going
// from one valid pair to another with them needs the right order, and a
// failure between them leaves the bucket half changed.) The tokens and
// any debt carry over as with SetRate, tokens above the new burst are lost
// as with SetBurst, and waiting callers keep their wake-up times. On an
// error, which names the field (Config.Rate is checked first), nothing
// changes.
func (b *Bucket) SetLimits(r float64, burst int) error {
	if err := validLimits(r, burst); err != nil {
		return err
	}
	return b.reconfigure(0, true, func(c *Config) { c.Rate, c.Burst = r, burst })
}

// SetLimitsAt is SetLimits at time now; see SetRateAt about now.
func (b *Bucket) SetLimitsAt(now time.Time, r float64, burst int) error {
	if err := validLimits(r, burst); err != nil {
		return err
	}
	return b.reconfigure(at(now), false, func(c *Config) { c.Rate, c.Burst = r, burst })
}

func validLimits(r float64, burst int) error {
	if err := validRate(r); err != nil {
		return err
	}
	return validBurst(burst) // the pair is checked by reconfigure, with ValidFill
}

// SetMaxWait changes Config.MaxWait for later waits.
func (b *Bucket) SetMaxWait(d time.Duration) error {
	if err := validMaxWait(d); err != nil {
		return err
	}
	return b.reconfigure(0, true, func(c *Config) { c.MaxWait = d })
}

// reconfigure replaces the current state by one with the edited config,
// carrying the tokens over at now (read from the clock under the lock when
// live, so that a setter's time is as late as possible: clock reads that
// raced ahead of it can only be a few nanoseconds later).
func (b *Bucket) reconfigure(now int64, live bool, edit func(*Config)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if live {
		now = clock.Nanos()
	}
	old, w := b.load()
	cfg := Config{Rate: old.rate, Burst: int(old.burst), MaxWait: old.maxWait}
	edit(&cfg)
	if err := ValidFill(cfg.Rate, cfg.Burst); err != nil {
		return err // nothing changes
	}
	s := &state{params: compile(cfg), base: now}
	var parked int64 // tokens the old state's stripes held (lease.go)
	if old != &zeroState {
		w, parked = b.retire(old, true)
	}
	s.word.Store(carry(old, w, parked, s, now))
	b.st.Store(s)
	return nil
}

// carry returns the word of s, counted from now, that holds what word w of
// old holds at now and parked tokens more. When both count the same units
// a token (a join of the stripes, SetMaxWait, and most SetBurst) the word
// itself moves, exactly; otherwise the tokens go through a float64, which
// is exact to a unit while they are below 2^53 units. (Every carry went
// through the float64, so every setter and join moved a large bucket by a
// few units, and rounded a debt toward zero.)
func carry(old *state, w, parked int64, s *state, now int64) int64 {
	if old.Mode == gcra.Rate && s.Mode == gcra.Rate && old.Shift == s.Shift && old.Interval == s.Interval {
		if e, exact := old.Moved(w, old.base, now); exact {
			e = min(max(e, -old.Tau), gcra.MaxTau) // the old word's tokens at now; a debt capped as FromTokens caps it
			return max(old.Refund(e, parked), -s.Tau)
		}
	}
	tk := float64(parked) + old.TokensFar(w, old.base, now) // now may be far from the base
	if old.Mode == gcra.Inf && s.Mode != gcra.Inf {
		tk = float64(s.burst) // leaving Inf: start full, as a new bucket would
	}
	return s.FromTokens(tk, 0)
}

// rebase replaces s, whose word is still w, by a state that counts from
// base now and holds word nw (relative to now), with the same config and
// stripes. It reports false, changing nothing, if s or its word changed
// meanwhile. The caller makes sure nw stands for the same bucket as w did,
// or for w after its own admission: a base moves only exactly.
func (b *Bucket) rebase(s *state, w, now, nw int64) (*state, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st.Load() != s || !s.word.CompareAndSwap(w, retired) {
		return nil, false // a setter, another rebase or an admission got there first
	}
	b.admittedOld.Add(s.admitted.Swap(harvested)) // as retire does
	ns := &state{params: s.params, base: now}
	ns.word.Store(nw)
	ns.ls.Store(s.ls.Load()) // the same config: the stripes carry on
	b.st.Store(ns)
	return ns, true
}
