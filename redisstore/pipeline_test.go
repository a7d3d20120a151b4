package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrent decisions share round trips (on a single node, one script
// call for all of a pipeline's decisions) and each still gets its own
// answer: every key admits exactly its burst, and a key that Redis
// refuses (it holds a hash) fails alone, not the decisions sent with it.
func TestConcurrentDecisionsShareRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name  string
		url   func() string
		merge bool
	}{{"single", srv.URL, true}, {"cluster", cluster.URL, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.url(), Config{Timeout: time.Second, BreakerThreshold: 1000}, false)
			if s.merge.Load() != tc.merge {
				t.Fatalf("merge = %v on %s", s.merge.Load(), tc.name)
			}
			const burst, tries, callers = 20, 25, 32
			b := newBuckets(t, s, RateConfig{Rate: 0.001, Burst: burst, OverLimitCache: -1, Prefix: fmt.Sprintf("merge:%d:", time.Now().UnixNano())})
			bad := "wrongtype"
			if err := s.Client().HSet(t.Context(), b.cfg.Prefix+"{"+bad+"}", "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
			before := s.Stats()
			scripts := scriptCalls(t, s)
			var wg sync.WaitGroup
			admitted := make([]int, callers)
			errs := make([]error, callers+1)
			for c := range callers {
				wg.Go(func() {
					for range tries {
						r, err := b.Allow(fmt.Sprint("k", c), 1)
						if err != nil {
							errs[c] = err
							return
						}
						if r.Allowed {
							admitted[c]++
						}
					}
				})
			}
			wg.Go(func() {
				for range tries {
					_, err := b.Allow(bad, 1)
					var re redis.Error
					if !errors.As(err, &re) {
						errs[callers] = fmt.Errorf("a decision on a hash key: want Redis's own error, got %v", err)
						return
					}
				}
			})
			wg.Wait()
			for c, err := range errs {
				if err != nil {
					t.Fatalf("caller %d: %v", c, err)
				}
			}
			for c, n := range admitted {
				if n != burst {
					t.Fatalf("key %d admitted %d of %d, want the burst %d", c, n, tries, burst)
				}
			}
			st := s.Stats()
			calls, trips := st.Calls-before.Calls, st.RoundTrips-before.RoundTrips
			t.Logf("%d decisions in %d round trips", calls, trips)
			if calls != (callers+1)*tries || trips >= calls {
				t.Fatalf("%d decisions in %d round trips: want %d decisions, fewer round trips", calls, trips, (callers+1)*tries)
			}
			// Redis's own count: on one node a pipeline's decisions are one
			// script call (as many calls as round trips, give or take the
			// NOSCRIPT retries of the first); on a Cluster, one each.
			if n := scriptCalls(t, s) - scripts; tc.merge && n > trips+1 || !tc.merge && n < calls {
				t.Fatalf("Redis ran %d script calls for %d decisions in %d round trips (merge %v)", n, calls, trips, tc.merge)
			}
		})
	}
}

// scriptCalls is the number of EVALSHA and EVAL calls Redis has run (on
// every master of a Cluster), from INFO commandstats.
func scriptCalls(t *testing.T, s *Store) uint64 {
	t.Helper()
	var total uint64
	count := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for line := range strings.Lines(info) {
			for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
				if rest, ok := strings.CutPrefix(line, cmd+"calls="); ok {
					n, err := strconv.ParseUint(rest[:strings.IndexByte(rest, ',')], 10, 64)
					if err != nil {
						return err
					}
					atomic.AddUint64(&total, n)
				}
			}
		}
		return nil
	}
	var err error
	switch c := s.Client().(type) {
	case *redis.Client:
		err = count(t.Context(), c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(t.Context(), count)
	}
	if err != nil {
		t.Fatal(err)
	}
	return total
}
