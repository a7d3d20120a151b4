package concurrency

import (
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

// MaxLimit is the largest concurrency limit a limiter accepts (16,777,215):
// the fast path packs the limit and the permits in flight into one word.
const MaxLimit = 1<<24 - 1

// Default CoDel parameters, from Facebook's "Fail at Scale" (Maurer, 2015):
// "a value of 5 milliseconds for M and 100 ms for N tends to work well
// across a wide set of use cases".
const (
	defaultCoDelTarget   = 5 * time.Millisecond
	defaultCoDelInterval = 100 * time.Millisecond
)

// invalid is the error for a bad field or argument: a *sluice.ConfigError,
// which matches sluice.ErrInvalidConfig.
func invalid(field string, v any, allowed string) error {
	return sluice.NewConfigError("concurrency", field, v, allowed)
}

// Discipline is the order in which queued callers are admitted and the rule
// that bounds their wait.
type Discipline uint8

const (
	// FIFO admits the oldest waiter first. Fair, but under sustained
	// overload every waiter waits the longest, so all of them may miss
	// their deadlines.
	FIFO Discipline = iota
	// LIFO admits the newest waiter first: under overload the newest caller
	// is the one most likely to still meet its deadline. When the queue is
	// full the oldest waiter is rejected (ReasonQueueFull) to make room for
	// the newcomer, since it is the one least likely to be served in time.
	LIFO
	// CoDel admits in FIFO order and bounds the wait by the state of the
	// queue: if the queue has not been empty within the last CoDelInterval
	// (a standing queue), a waiter may wait at most CoDelTarget; otherwise
	// at most CoDelInterval. A waiter over its bound is shed (ReasonShed).
	CoDel
	// AdaptiveLIFO is CoDel whose order switches with the queue's state:
	// FIFO while the queue drains (it has been empty within the last
	// CoDelInterval), LIFO once a standing queue forms. In LIFO mode a full
	// queue rejects its oldest waiter, as LIFO does.
	AdaptiveLIFO
	numDisciplines
)

var disciplineNames = [numDisciplines]string{"fifo", "lifo", "codel", "adaptive_lifo"}

// String returns the discipline's name as ParseDiscipline accepts it.
func (d Discipline) String() string {
	if d < numDisciplines {
		return disciplineNames[d]
	}
	return "discipline(" + strconv.Itoa(int(d)) + ")"
}

// ParseDiscipline parses "fifo", "lifo", "codel" or "adaptive_lifo".
func ParseDiscipline(s string) (Discipline, error) {
	for i, n := range disciplineNames {
		if s == n {
			return Discipline(i), nil
		}
	}
	return 0, invalid("Discipline", strconv.Quote(s), "must be fifo, lifo, codel or adaptive_lifo")
}

// MarshalText implements encoding.TextMarshaler.
func (d Discipline) MarshalText() ([]byte, error) {
	if d >= numDisciplines {
		return nil, invalid("Discipline", int(d), "must be FIFO, LIFO, CoDel or AdaptiveLIFO")
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, so a Discipline can be
// read from YAML, JSON or a flag.
func (d *Discipline) UnmarshalText(b []byte) error {
	v, err := ParseDiscipline(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Config configures a Limiter or a Core. The zero value of every field but
// Limit is a valid default.
type Config struct {
	// Limit is the number of permits that may be held at once, at least 1
	// and at most MaxLimit. With an Algorithm, Limit is the initial limit
	// and 0 means Algorithm.Limit().
	Limit int
	// MaxQueue is the most callers that may wait for a permit. 0 (the
	// default) means no queue: a caller that finds every permit held is
	// rejected at once with sluice.ReasonLimit.
	MaxQueue int
	// MaxWait bounds the time a caller waits in the queue; past it the
	// caller is rejected with sluice.ReasonQueueTimeout. 0 (the default)
	// means the wait is bounded only by the caller's context (and by CoDel,
	// for the CoDel disciplines).
	MaxWait time.Duration
	// MaxWaitServices, when positive, also bounds the wait in the queue to
	// that many mean service times (the mean time a permit is held, as
	// the limiter measures it from released permits) once the queue
	// stands: past it the caller is rejected with
	// sluice.ReasonQueueTimeout. As in CoDel, a queue stands when it has
	// not been empty for four times the bound; until then a waiter may
	// stay until four times the bound after the queue was last empty, so
	// a burst the limit can drain is served, not shed. It scales with the
	// service, so a limit whose service time is not known in advance (an
	// Algorithm's) gets a wait bound anyway: LIFO otherwise leaves its
	// oldest waiters waiting until their own deadline, to be rejected
	// then. With MaxWait also set, the shorter bound applies. No bound
	// applies before the first release with a latency; from then on it
	// applies to the waiters queued before it too. 0 (the default) means
	// none.
	MaxWaitServices float64
	// Discipline is the queue order and wait rule; FIFO by default.
	Discipline Discipline
	// CoDelTarget is the longest wait in a standing queue for the CoDel
	// and AdaptiveLIFO disciplines; 0 means 5 ms.
	CoDelTarget time.Duration
	// CoDelInterval is how long the queue must have stayed non-empty to be
	// a standing queue, and the longest wait otherwise, for the CoDel and
	// AdaptiveLIFO disciplines; 0 means 100 ms.
	CoDelInterval time.Duration
	// Algorithm, if not nil, drives the limit: every permit released with
	// sluice.Success or sluice.Dropped feeds it a sample and its answer
	// (at least 1) becomes the limit. Ignore and cancelled permits feed nothing. The
	// limiter owns the Algorithm from then on: do not call it elsewhere.
	Algorithm adaptive.Algorithm
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	// The limit checked below is the Algorithm's when the caller left
	// Config.Limit 0; the error then names where it came from.
	limitField, limitNote := "Config.Limit", ""
	switch {
	case c.Limit == 0 && c.Algorithm != nil:
		c.Limit = c.Algorithm.Limit()
		limitField, limitNote = "Config.Algorithm.Limit()", " (the initial limit, as Config.Limit is 0)"
	case c.Limit == 0:
		// The likeliest reason is an adaptive limit meant and not set.
		limitNote = ", or set Config.Algorithm for an adaptive limit"
	}
	if c.CoDelTarget == 0 {
		c.CoDelTarget = defaultCoDelTarget
	}
	if c.CoDelInterval == 0 {
		c.CoDelInterval = defaultCoDelInterval
	}
	switch {
	case c.Limit < 1 || c.Limit > MaxLimit:
		return c, invalid(limitField, c.Limit, "must be 1 to "+strconv.Itoa(MaxLimit)+limitNote)
	case c.MaxQueue < 0 || c.MaxQueue > MaxLimit:
		return c, invalid("Config.MaxQueue", c.MaxQueue, "must be 0 (no queue) to "+strconv.Itoa(MaxLimit))
	case c.MaxWait < 0:
		return c, invalid("Config.MaxWait", c.MaxWait, "must be >= 0 (0: unbounded)")
	case !(c.MaxWaitServices >= 0) || math.IsInf(c.MaxWaitServices, 1):
		return c, invalid("Config.MaxWaitServices", c.MaxWaitServices, "must be a finite number >= 0 (0: none)")
	case c.Discipline >= numDisciplines:
		return c, invalid("Config.Discipline", int(c.Discipline), "must be FIFO, LIFO, CoDel or AdaptiveLIFO")
	case c.CoDelTarget < 0:
		return c, invalid("Config.CoDelTarget", c.CoDelTarget, "must be >= 0 (0: 5ms)")
	case c.CoDelInterval < 0:
		return c, invalid("Config.CoDelInterval", c.CoDelInterval, "must be >= 0 (0: 100ms)")
	}
	return c, nil
}
