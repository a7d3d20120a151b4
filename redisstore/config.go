package redisstore

import (
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// MaxKeyLen is the longest key (prefix included) a limiter accepts, in
// bytes. Redis takes keys up to 512 MB; a limit here keeps one client's
// key from costing the store more than that.
const MaxKeyLen = 1024

func checkKey(field, key string) error {
	if len(key) > MaxKeyLen {
		return sluice.NewConfigError("redisstore", field, len(key), "key length must be at most 1024 bytes (MaxKeyLen)")
	}
	return nil
}

func durField(field string, p *time.Duration, def, lo, hi time.Duration) error {
	if *p == 0 {
		*p = def
		return nil
	}
	if *p < lo || *p > hi {
		return sluice.NewConfigError("redisstore", field, *p, "must be between "+lo.String()+" and "+hi.String())
	}
	return nil
}

func intField(field string, p *int, def, lo, hi int) error {
	if *p == 0 {
		*p = def
		return nil
	}
	if *p < lo || *p > hi {
		return sluice.NewConfigError("redisstore", field, *p, "must be between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi))
	}
	return nil
}
