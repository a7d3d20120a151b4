package redisstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// phase runs decisions from 4 goroutines for d and returns the longest
// decision, how many took longer than over, and the errors seen.
func phase(b *Buckets, d, over time.Duration) (longest time.Duration, n, late int, errs map[string]int) {
	var mu sync.Mutex
	errs = map[string]int{}
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := range 4 {
		wg.Go(func() {
			key := "fault-" + string(rune('a'+w))
			for time.Now().Before(end) {
				t0 := time.Now()
				p, err := b.TryAcquire(key)
				el := time.Since(t0)
				p.Release(sluice.Success, 0)
				mu.Lock()
				longest = max(longest, el)
				n++
				if el > over {
					late++
				}
				if err != nil {
					errs[sluice.ReasonOf(err).String()]++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	return longest, n, late, errs
}

// Redis paused (SIGSTOP) past the timeout, resumed, killed, restarted and
// flushed under each failure policy: decisions answer within the timeout
// (all but 1%; every one within the scheduling slack of a loaded machine), the policy
// decides while Redis is away, the breaker opens, and shared decisions
// come back once Redis does.
func TestFaults(t *testing.T) {
	for _, f := range []Failure{FailOpen, FailClosed, FailLocal} {
		t.Run(f.String(), func(t *testing.T) {
			rs, err := redistest.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			const timeout = 20 * time.Millisecond
			// The timeout bounds the decision (the store gives up on Redis
			// early enough for late timers): 99% of decisions must answer
			// within it. The machine is shared by a loaded 2-core box under
			// -race, where a runnable goroutine may wait tens of ms for a
			// core: every one within timeout+100ms.
			const slack, worst = 0, 100 * time.Millisecond
			s := openStore(t, rs.URL(), Config{Timeout: timeout, BreakerThreshold: 3, BreakerCooldown: 100 * time.Millisecond}, false)
			b := newBuckets(t, s, RateConfig{Rate: 1e6, Burst: 1e6, Failure: f, Replicas: 2})
			// Connect and load the scripts first, with time to spare: the
			// first call on a loaded machine may need more than 20 ms.
			if err := s.Check(t.Context()); err != nil {
				t.Fatal(err)
			}

			check := func(name string, d time.Duration, wantPolicy bool) {
				t.Helper()
				before := b.LimiterStats().Fallbacks
				longest, n, late, errs := phase(b, d, timeout+slack)
				fb := b.LimiterStats().Fallbacks - before
				t.Logf("%s: %d decisions, %d over timeout+%v, longest %v, fallbacks %d, rejections %v, breaker %v", name, n, late, slack, longest, fb, errs, s.Stats().Breaker)
				if late*100 > n || longest > timeout+worst {
					t.Errorf("%s: %d of %d decisions took longer than timeout %v + %v; longest %v", name, late, n, timeout, slack, longest)
				}
				if wantPolicy && fb == 0 {
					t.Errorf("%s: Redis away and no decision by the failure policy", name)
				}
				if f == FailClosed && wantPolicy && errs["store"] == 0 {
					t.Errorf("%s: fail closed rejected nothing with ReasonStore", name)
				}
				if f != FailClosed && errs["store"] != 0 {
					t.Errorf("%s: %v rejected with ReasonStore", name, f)
				}
			}
			recover := func(name string) {
				t.Helper()
				start := time.Now()
				for {
					fb := b.LimiterStats().Fallbacks
					p, _ := b.TryAcquire("recovery")
					p.Release(sluice.Success, 0)
					if b.LimiterStats().Fallbacks == fb {
						break
					}
					if time.Since(start) > 5*time.Second {
						t.Fatalf("%s: no shared decision 5s after Redis came back", name)
					}
					time.Sleep(time.Millisecond)
				}
				t.Logf("%s: shared decisions again after %v", name, time.Since(start))
			}

			check("healthy", 100*time.Millisecond, false)
			if err := rs.Pause(); err != nil {
				t.Fatal(err)
			}
			check("paused", 500*time.Millisecond, true)
			if s.Stats().BreakerTrips == 0 {
				t.Error("breaker never opened while Redis was paused")
			}
			if err := rs.Resume(); err != nil {
				t.Fatal(err)
			}
			recover("resumed")
			rs.Kill()
			check("killed", 300*time.Millisecond, true)
			if err := rs.Restart(); err != nil {
				t.Fatal(err)
			}
			recover("restarted") // an empty Redis: the scripts are loaded again
			if err := s.Client().FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.Client().ScriptFlush(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			check("flushed", 100*time.Millisecond, false)
			recover("flushed") // a loaded machine may have timed out the reloads
			if r, err := b.Allow("after-flush", 1); err != nil || !r.Allowed {
				t.Fatalf("after SCRIPT FLUSH: %+v %v", r, err)
			}
		})
	}
}

// The FailLocal limiter holds limit/N: with N = 4 configured and a shared
// burst of 40, a dead Redis leaves each replica 10 at once.
func TestFailLocalDividesTheLimit(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, rs.URL(), Config{Timeout: 20 * time.Millisecond}, false)
	rs.Close()
	b := newBuckets(t, s, RateConfig{Rate: 0.001, Burst: 40, Failure: FailLocal, Replicas: 4})
	ok := 0
	for range 40 {
		if _, err := b.TryAcquire("k"); err == nil {
			ok++
		} else if !errors.Is(err, sluice.ErrRate) {
			t.Fatalf("local rejection: %v", err)
		}
	}
	if ok != 10 {
		t.Fatalf("admitted %d with Redis dead, want 40/4 = 10", ok)
	}
}
