package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrScript is matched by the error of Check when Redis refuses the
// limiters' Lua scripts: a server older than 5.0 (a script that writes
// after TIME needs effects replication, the default since 5.0; asking for
// it with redis.replicate_commands on every call spent Redis's time for
// nothing on newer servers), or one where
// EVAL, EVALSHA or SCRIPT is disabled or renamed.
var ErrScript = errors.New("redisstore: Redis refused the limiter scripts (needs Redis >= 5.0 with EVAL, EVALSHA and SCRIPT)")

var allScripts = []*redis.Script{gcraScript, gcraBatchScript, refundScript, acquireScript, renewScript, releaseScript, heartbeatScript}

// Check loads the limiters' scripts into Redis (every master of a Cluster)
// and runs one decision on a scratch key, so that a server that cannot run
// them is found at startup with a clear error instead of at the first
// request. Open and New do not call it: a replica that starts while Redis
// is down serves under its failure policy instead of crash-looping.
func (s *Store) Check(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return fmt.Errorf("%w: SCRIPT LOAD: %v", ErrScript, err)
		}
	}
	v, err := gcraScript.Run(ctx, s.client, []string{"sluice:check:{check}"}, "1000", "1", 1, 1, 0).Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrScript, err)
	}
	if _, err := parseGCRA(v); err != nil {
		return fmt.Errorf("%w: %v", ErrScript, err)
	}
	return nil
}
