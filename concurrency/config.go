package concurrency

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/configerr"
)

// MaxLimit is the largest concurrency limit a limiter accepts (16,777,215):
// the fast path packs the limit and the permits in flight into one word.
const MaxLimit = 1<<24 - 1

// Default CoDel parameters, from Facebook's "Fail at Scale" (Maurer, 2015):
// "a value of 5 milliseconds for M and 100 ms for N tends to work well
// across a wide set of use cases".
const (
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
)

// ErrInvalidConfig is matched (errors.Is) by every error New and NewCore
// return for a bad Config; the message names the field.
var ErrInvalidConfig = configerr.New("concurrency: invalid config")

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
	return 0, fmt.Errorf("%w: unknown discipline %q (want fifo, lifo, codel or adaptive_lifo)", ErrInvalidConfig, s)
}

// MarshalText implements encoding.TextMarshaler.
func (d Discipline) MarshalText() ([]byte, error) {
	if d >= numDisciplines {
		return nil, fmt.Errorf("%w: unknown discipline %d", ErrInvalidConfig, d)
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
	// Discipline is the queue order and wait rule; FIFO by default.
	Discipline Discipline
	// CoDelTarget is the longest wait in a standing queue for the CoDel
	// and AdaptiveLIFO disciplines; 0 means DefaultCoDelTarget (5 ms).
	CoDelTarget time.Duration
	// CoDelInterval is how long the queue must have stayed non-empty to be
	// a standing queue, and the longest wait otherwise, for the CoDel and
	// AdaptiveLIFO disciplines; 0 means DefaultCoDelInterval (100 ms).
	CoDelInterval time.Duration
	// Algorithm, if not nil, drives the limit: every permit released with
	// sluice.Success or sluice.Dropped feeds it a sample and its answer
	// (at least 1) becomes the limit. Ignore and cancelled permits feed nothing. The
	// limiter owns the Algorithm from then on: do not call it elsewhere.
	Algorithm adaptive.Algorithm
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Limit == 0 && c.Algorithm != nil {
		c.Limit = c.Algorithm.Limit()
	}
	if c.CoDelTarget == 0 {
		c.CoDelTarget = DefaultCoDelTarget
	}
	if c.CoDelInterval == 0 {
		c.CoDelInterval = DefaultCoDelInterval
	}
	switch {
	case c.Limit < 1 || c.Limit > MaxLimit:
		return c, fmt.Errorf("%w: Limit = %d, want 1 to %d", ErrInvalidConfig, c.Limit, MaxLimit)
	case c.MaxQueue < 0:
		return c, fmt.Errorf("%w: MaxQueue = %d, want 0 (no queue) or more", ErrInvalidConfig, c.MaxQueue)
	case c.MaxQueue > MaxLimit:
		return c, fmt.Errorf("%w: MaxQueue = %d, want at most %d", ErrInvalidConfig, c.MaxQueue, MaxLimit)
	case c.MaxWait < 0:
		return c, fmt.Errorf("%w: MaxWait = %v, want 0 (unbounded) or more", ErrInvalidConfig, c.MaxWait)
	case c.Discipline >= numDisciplines:
		return c, fmt.Errorf("%w: Discipline = %d, want FIFO, LIFO, CoDel or AdaptiveLIFO", ErrInvalidConfig, c.Discipline)
	case c.CoDelTarget < 0:
		return c, fmt.Errorf("%w: CoDelTarget = %v, want 0 (default 5ms) or more", ErrInvalidConfig, c.CoDelTarget)
	case c.CoDelInterval < 0:
		return c, fmt.Errorf("%w: CoDelInterval = %v, want 0 (default 100ms) or more", ErrInvalidConfig, c.CoDelInterval)
	}
	return c, nil
}
