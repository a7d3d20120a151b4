package keyed

import (
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults for the zero fields of Config.
const (
	defaultMaxKeys     = 1 << 16
	defaultIdleTimeout = time.Minute
)

// OverflowKey is the key Config.New is called with, once, to build the shared
// overflow limiter. It contains a NUL byte so that it cannot collide with an
// IP address, a header value or an API key by accident.
const OverflowKey = "\x00sluice/keyed/overflow"

// invalid is the error for a bad field: a *sluice.ConfigError, which
// matches sluice.ErrInvalidConfig.
func invalid(field string, v any, allowed string) error {
	return sluice.NewConfigError("keyed", field, v, allowed)
}

// Config configures a Map.
type Config[L sluice.Limiter] struct {
	// New builds the limiter of a key the first time the key is seen, and
	// again if it is seen after it was evicted. Required.
	//
	// It is also called once by keyed.New with OverflowKey, to build the
	// limiter that keys beyond MaxKeys share (see Map). Return a tighter
	// limiter for that key if new clients arriving during a flood of keys
	// should be squeezed harder.
	//
	// New is called with the key's shard locked, so that a key never gets
	// two limiters: keep it cheap (an allocation) and do not call back into
	// the Map from it. An error is returned, wrapped, from Get and Acquire;
	// so is a *sluice.ConfigError for a nil limiter (when L is an interface
	// type) returned without one, and nothing is stored.
	// The Map keeps only a hash of the key; a limiter that keeps the key
	// itself adds its length to the bytes per key.
	New func(key string) (L, error)

	// MaxKeys is the hard cap on live keys; the memory a Map holds is
	// bounded by MaxKeys times the bytes per key (see the package doc;
	// measurements in docs/design.md).
	// Default 65,536.
	MaxKeys int

	// IdleTimeout is how long a key must go unused before it may be
	// evicted to make room for a new key. Default 1 minute.
	//
	// For a token bucket, use at least Burst/Rate: a key evicted before its
	// bucket refilled comes back with a full bucket, which is a free burst.
	//
	// Last use is recorded to within IdleTimeout/64 (a hot key is not
	// rewritten on every lookup), so a key may go up to that much early.
	IdleTimeout time.Duration
}

func (c Config[L]) withDefaults() (Config[L], error) {
	if c.New == nil {
		return c, invalid("Config.New", nil, "is required")
	}
	var err error
	if c.MaxKeys, err = validMaxKeys("Config", c.MaxKeys); err != nil {
		return c, err
	}
	c.IdleTimeout, err = validIdle("Config", c.IdleTimeout)
	return c, err
}

func validIdle(typ string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, invalid(typ+".IdleTimeout", d, "must be >= 0 (0: 1m)")
	case d == 0:
		return defaultIdleTimeout, nil
	case d > maxIdle:
		return 0, invalid(typ+".IdleTimeout", d, "must be <= "+time.Duration(maxIdle).String())
	}
	return d, nil
}

// maxIdle keeps IdleTimeout far from overflowing int64 nanos (Buckets adds
// it to a refill time, saturating).
const maxIdle = 1 << 61

func validMaxKeys(typ string, n int) (int, error) {
	switch {
	case n < 0:
		return 0, invalid(typ+".MaxKeys", n, "must be >= 0 (0: 65536)")
	case n == 0:
		return defaultMaxKeys, nil
	case n > maxMaxKeys:
		return 0, invalid(typ+".MaxKeys", n, "must be <= "+strconv.Itoa(maxMaxKeys))
	}
	return n, nil
}

// maxMaxKeys keeps slot indexes within int32 in every shard.
const maxMaxKeys = 1 << 30
