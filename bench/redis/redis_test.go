// Package redis compares redisstore's shared token bucket with
// github.com/go-redis/redis_rate/v10 on the same redis-server (started by
// the benchmark on a free loopback port), side by side in one run:
//
//	cd bench && go test -run '^$' -bench Redis -benchtime 2s -count 3 ./redis
//
// Each benchmark reports decisions/s and p99-µs (the 99th percentile of
// one decision as its caller saw it) next to ns/op, and the CPU each
// decision cost the benchmark process and the redis-server
// (client-cpu-µs/op, server-cpu-µs/op; see CPU), the part of the
// server's that Redis counts as running the script (script-µs/op, INFO
// commandstats), and sluice's calls/roundtrip. -redis.pipelines and
// -redis.window set the store's Pipelines and BatchWindow, to compare
// them.
package redis

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// quiet drops go-redis's log lines (failed dials to the paused server),
// which would interleave with the benchmark output.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quiet{}) }

var (
	pipes  = flag.Int("redis.pipelines", 0, "redisstore Config.Pipelines (0: default)")
	window = flag.Duration("redis.window", 0, "redisstore Config.BatchWindow (0: no wait, the default)")
)

var (
	srvOnce sync.Once
	srv     *redistest.Server
	srvErr  error
)

// server starts one redis-server for every benchmark of the run; the
// process dies with the test binary (Pdeathsig) if nothing closes it.
func server(b *testing.B) *redistest.Server {
	srvOnce.Do(func() { srv, srvErr = redistest.Start() })
	if srvErr != nil {
		b.Fatal(srvErr)
	}
	return srv
}

// run splits b.N decisions over callers goroutines and reports the
// throughput and the p99 of one decision.
func run(b *testing.B, callers int, decide func(caller int) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, callers)
	var failed atomic.Int64
	cpu, err := NewCPU(context.Background(), server(b).Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer cpu.Close()
	c0, err := cpu.Now()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			l := make([]time.Duration, 0, b.N/callers+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := decide(c); err != nil {
					if failed.Add(1) == 1 {
						b.Log("first error:", err)
					}
				}
				l = append(l, time.Since(t0))
			}
			lat[c] = l
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	c1, err := cpu.Now()
	if err != nil {
		b.Fatal(err)
	}
	used := c1.Sub(c0)
	b.ReportMetric(float64(used.Client.Nanoseconds())/1e3/float64(b.N), "client-cpu-µs/op")
	b.ReportMetric(float64(used.Server.Nanoseconds())/1e3/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64(used.Script.Nanoseconds())/1e3/float64(b.N), "script-µs/op")
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/el.Seconds(), "decisions/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	if f := failed.Load(); f > 0 {
		b.ReportMetric(float64(f), "errors")
	}
}

func sluiceBuckets(b *testing.B, cfg redisstore.RateConfig) (*redisstore.Buckets, *redisstore.Store) {
	// A generous timeout and a breaker that does not open: this measures
	// throughput, not the failure path (a failed decision counts in
	// "errors").
	s, err := redisstore.Open(server(b).URL(), redisstore.Config{Timeout: time.Second, BreakerThreshold: 1000, Pipelines: *pipes, BatchWindow: *window})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	bk, err := redisstore.NewBuckets(s, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return bk, s
}

func redisRate(b *testing.B) *redis_rate.Limiter {
	c := goredis.NewClient(&goredis.Options{Addr: server(b).Addr()})
	b.Cleanup(func() { c.Close() })
	return redis_rate.NewLimiter(c)
}

var keys = func() (k [64]string) {
	for i := range k {
		k[i] = fmt.Sprintf("k%d", i)
	}
	return
}()

// Admitted decisions (a bucket that never runs dry), one key per caller.
func BenchmarkRedisDecision(b *testing.B) {
	ctx := context.Background()
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("lib=sluice/callers=%d", callers), func(b *testing.B) {
			bk, s := sluiceBuckets(b, redisstore.RateConfig{Rate: 1e7, Burst: 1e7})
			run(b, callers, func(c int) error {
				r, err := bk.Allow(keys[c], 1)
				if err == nil && !r.Allowed {
					err = fmt.Errorf("rejected")
				}
				return err
			})
			st := s.Stats()
			b.ReportMetric(float64(st.Calls)/float64(max(1, st.RoundTrips)), "calls/roundtrip")
		})
		b.Run(fmt.Sprintf("lib=redis_rate/callers=%d", callers), func(b *testing.B) {
			l := redisRate(b)
			lim := redis_rate.Limit{Rate: 1e7, Burst: 1e7, Period: time.Second}
			run(b, callers, func(c int) error {
				r, err := l.Allow(ctx, keys[c], lim)
				if err == nil && r.Allowed == 0 {
					err = fmt.Errorf("rejected")
				}
				return err
			})
		})
	}
}

// A rejected flood: 64 callers on one key that is over its limit for an
// hour. sluice answers from its over-limit cache; redis_rate asks Redis.
func BenchmarkRedisRejectedFlood(b *testing.B) {
	ctx := context.Background()
	b.Run("lib=sluice/callers=64", func(b *testing.B) {
		bk, _ := sluiceBuckets(b, redisstore.RateConfig{Rate: 1.0 / 3600, Burst: 1})
		bk.TryAcquire("flood-s")
		run(b, 64, func(int) error {
			if _, err := bk.TryAcquire("flood-s"); err == nil {
				return fmt.Errorf("admitted")
			}
			return nil
		})
	})
	b.Run("lib=redis_rate/callers=64", func(b *testing.B) {
		l := redisRate(b)
		lim := redis_rate.Limit{Rate: 1, Burst: 1, Period: time.Hour}
		l.Allow(ctx, "flood-r", lim)
		run(b, 64, func(int) error {
			r, err := l.Allow(ctx, "flood-r", lim)
			if err == nil && r.Allowed != 0 {
				return fmt.Errorf("admitted")
			}
			return err
		})
	})
}

// Redis paused with SIGSTOP: the first decisions wait for Redis until the
// timeout (5 ms) less the store's margin for late timers, then fail open,
// and together open the breaker; the next ones are answered by the
// failure policy at once. Reports the p99 and the longest of the first
// BreakerThreshold decisions, and of 64 concurrent first decisions (the
// pipelined path; bar: p99 <= the timeout), and the p99 once the breaker
// is open.
func BenchmarkRedisPaused(b *testing.B) {
	rs, err := redistest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	const timeout = 5 * time.Millisecond
	s, err := redisstore.Open(rs.URL(), redisstore.Config{Timeout: timeout, BreakerThreshold: 3, BreakerCooldown: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bk, err := redisstore.NewBuckets(s, redisstore.RateConfig{Rate: 1e6, Burst: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := rs.Pause(); err != nil {
		b.Fatal(err)
	}
	defer rs.Resume()
	b.Run("breaker=closed/first=3", func(b *testing.B) {
		// Each round: a new store (its breaker closed), then 3 decisions
		// that each wait for the timeout and together open the breaker.
		var first []time.Duration
		for b.Loop() {
			s2, err := redisstore.Open(rs.URL(), redisstore.Config{Timeout: timeout, BreakerThreshold: 3, BreakerCooldown: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			bk2, err := redisstore.NewBuckets(s2, redisstore.RateConfig{Rate: 1e6, Burst: 1e6})
			if err != nil {
				b.Fatal(err)
			}
			for range 3 {
				t0 := time.Now()
				bk2.TryAcquire("p")
				first = append(first, time.Since(t0))
			}
			if st := s2.Stats().Breaker; st != redisstore.BreakerOpen {
				b.Fatalf("breaker %v after 3 timeouts", st)
			}
			s2.Close()
		}
		slices.Sort(first)
		b.ReportMetric(float64(first[len(first)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(first[len(first)-1].Microseconds()), "max-µs")
		b.ReportMetric(float64(timeout.Microseconds()), "timeout-µs")
	})
	b.Run("breaker=closed/callers=64", func(b *testing.B) {
		// Each round: a new store, 64 decisions at once, all waiting for
		// Redis (one sent directly, the rest queued for one pipeline)
		// until the timeout less the store's margin.
		var first []time.Duration
		var mu sync.Mutex
		for b.Loop() {
			s2, err := redisstore.Open(rs.URL(), redisstore.Config{Timeout: timeout, BreakerThreshold: 1000, BreakerCooldown: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			bk2, err := redisstore.NewBuckets(s2, redisstore.RateConfig{Rate: 1e6, Burst: 1e6})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for c := range 64 {
				wg.Go(func() {
					t0 := time.Now()
					bk2.TryAcquire(keys[c])
					el := time.Since(t0)
					mu.Lock()
					first = append(first, el)
					mu.Unlock()
				})
			}
			wg.Wait()
			s2.Close()
		}
		slices.Sort(first)
		b.ReportMetric(float64(first[len(first)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(first[len(first)-1].Microseconds()), "max-µs")
		b.ReportMetric(float64(timeout.Microseconds()), "timeout-µs")
	})
	for range 3 { // the timeouts that open the breaker of s
		bk.TryAcquire("p")
	}
	if st := s.Stats().Breaker; st != redisstore.BreakerOpen {
		b.Fatalf("breaker %v after 3 timeouts", st)
	}
	b.Run("breaker=open/callers=1", func(b *testing.B) {
		run(b, 1, func(int) error { _, err := bk.TryAcquire("p"); return err })
	})
	b.Run("breaker=open/callers=64", func(b *testing.B) {
		run(b, 64, func(int) error { _, err := bk.TryAcquire("p"); return err })
	})
}
