package proxy

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Reloads that change the store under load (each one a new connection,
// the old one closed drain_timeout later) fail no request, with the store
// failing closed (a request that found its store closed would be a 503),
// and leave no lease behind in Redis.
func TestStoreReloadUnderLoad(t *testing.T) {
	r := startRedis(t)
	up := okUpstream(t)
	base := "drain_timeout: 5s\n" + strings.Replace(strings.ReplaceAll(sharedConcConfig, "REDIS", r.URL()),
		"concurrency: {limit: 2, max_wait: 1ms}", "concurrency: {limit: 1000}\n    rate: {rate: 1e6, burst: 100000, per_key: true}", 1)
	// The test is about reloads, not latency: generous bounds, so that a
	// loaded 2-core box under -race does not refuse requests by time. Seen
	// with sharedConcConfig's 50 ms max_wait and two busy loops beside
	// the test: a few requests in 1,000 refused queue_timeout, the per-key
	// round trip having outlasted the policy's max_wait.
	base = strings.Replace(base, "max_wait: 50ms", "max_wait: 5s", 1)
	base = strings.Replace(base, "timeout: 200ms", "timeout: 1s", 1)
	cfgA, cfgB := base, strings.Replace(base, "timeout: 1s", "timeout: 900ms", 1)
	p := start(t, cfgA, up)

	const workers = 4
	var (
		stop         atomic.Bool
		ok, failed   atomic.Int64
		wg           sync.WaitGroup
		firstFailure atomic.Pointer[string]
	)
	c := client(t)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(time.Minute) // bounded in count and time
			for i := 0; i < 100_000 && !stop.Load() && time.Now().Before(deadline); i++ {
				resp, err := c.Get(p.url + "/x")
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					msg := fmt.Sprint(err)
					if err == nil {
						msg = resp.Status + " " + strings.TrimSpace(string(body))
					}
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, &msg)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	const reloads = 100
	for i := range reloads {
		text := cfgB
		if i%2 == 1 {
			text = cfgA
		}
		writeConfig(t, p.path, text, up)
		if err := p.s.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond) // let requests overlap each version
	}
	stop.Store(true)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d failed requests (first: %s) of %d", n, *firstFailure.Load(), n+ok.Load())
	}
	if ok.Load() < reloads {
		t.Errorf("only %d requests during %d reloads: the load did not overlap the reloads", ok.Load(), reloads)
	}
	// Every lease released: a permit is released at the end of its
	// answer's body, just after the client has it, and a lease whose
	// acquire timed out is removed by the next renewal (every TTL/3,
	// 3.3 s); 6 s is still well below the 10 s TTL, past which a lease
	// never released would have vanished by itself and hidden the leak.
	rc := p.s.cur.Load().store("shared").s.Client()
	var n int64
	var err error
	if !waitFor(6*time.Second, func() bool {
		n, err = rc.ZCard(t.Context(), "sluice:conc:{proxy:two}").Result()
		return err == nil && n == 0
	}) {
		t.Fatalf("%d leases left in Redis 6 s after the load (%v)", n, err)
	}
	t.Logf("%d requests during %d store-changing reloads", ok.Load(), reloads)
}
