package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/redisstore/redistest"
)

// sharedConcConfig: a concurrency limit of 2 shared by the proxies, no
// wait for a slot. REDIS and UPSTREAM are replaced.
const sharedConcConfig = `reload: {poll: 0s}
stores:
  - name: shared
    url: REDIS
    timeout: 200ms
    failure: closed
routes:
  - name: slow
    upstream: UPSTREAM
    policy: two
policies:
  - name: two
    store: shared
    max_wait: 50ms
    concurrency: {limit: 2, max_wait: 1ms}
`

// Two proxies share one concurrency limit of 2: with two requests held
// upstream (one through each proxy), a third through either is refused
// with 503; once they finish, a slot is free again.
func TestStoreSharedConcurrencyAcrossProxies(t *testing.T) {
	r := startRedis(t)
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	up := upstream(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/hold" {
			entered.Done()
			<-release
		}
		w.Write([]byte("ok"))
	})
	text := strings.ReplaceAll(sharedConcConfig, "REDIS", r.URL())
	a := start(t, text, up)
	b := start(t, text, up)
	c := client(t)
	codes := make(chan int, 2)
	for _, p := range []*running{a, b} {
		go func() {
			resp, err := c.Get(p.url + "/hold")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	entered.Wait() // both hold a lease in Redis
	for _, p := range []*running{a, b} {
		resp, body := get(t, c, newReq(t, "GET", p.url+"/x"))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("third request with 2 in flight across the proxies: %d %q, want 503", resp.StatusCode, body)
		}
	}
	// GET /limits shows the shared limit and its store.
	_, body := get(t, c, newReq(t, "GET", a.admin+"/limits"))
	var lim []limitsView
	if err := json.Unmarshal([]byte(body), &lim); err != nil || len(lim) != 1 || lim[0].Store != "shared" || lim[0].Concurrency == nil || lim[0].Concurrency.Limit != 2 || lim[0].Concurrency.InFlight != 1 {
		t.Errorf("GET /limits: %v %s", err, body)
	}
	close(release)
	for range 2 {
		if code := <-codes; code != 200 {
			t.Errorf("a held request: %d", code)
		}
	}
	if resp, _ := get(t, c, newReq(t, "GET", b.url+"/x")); resp.StatusCode != 200 {
		t.Errorf("after the releases: %d, want 200", resp.StatusCode)
	}
}

// A redis+cluster:// store: two proxies share one per-key quota on a
// real three-master Redis Cluster.
func TestStoreClusterTwoProxies(t *testing.T) {
	cl, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	up := okUpstream(t)
	text := sharedText(cl.URL(), "closed")
	a := start(t, text, up)
	b := start(t, text, up)
	c := client(t)
	for _, who := range []string{"alice", "bob", "carol"} { // keys on different slots
		admitted := 0
		for i := range 30 {
			p := a
			if i%2 == 1 {
				p = b
			}
			if resp, _ := get(t, c, clientReq(t, p.url, who)); resp.StatusCode == 200 {
				admitted++
			}
		}
		if admitted != 10 {
			t.Errorf("%s on the cluster through two proxies: %d admitted, want 10", who, admitted)
		}
	}
}

// A reload that changes a store opens a new one and rebuilds the policies
// in it; a request that holds a lease of the old store across the reload
// finishes with it (answered 200, its lease released in Redis, not left
// to expire), and the old store and its lease renewal are closed
// drain_timeout later (TestMain's goleak would see a renewer or a
// pipeline left running).
func TestStoreReloadChangedStore(t *testing.T) {
	r := startRedis(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		w.Write([]byte("ok"))
	})
	text := "drain_timeout: 1s\n" + strings.ReplaceAll(sharedConcConfig, "REDIS", r.URL())
	p := start(t, text, up)
	c := client(t)
	held := make(chan int, 1)
	go func() {
		resp, err := c.Get(p.url + "/hold")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-entered
	st0 := p.s.cur.Load()
	writeConfig(t, p.path, strings.Replace(text, "timeout: 200ms", "timeout: 300ms", 1), up)
	if err := p.s.Reload(); err != nil {
		t.Fatal(err)
	}
	st1 := p.s.cur.Load()
	if st1.store("shared") == st0.store("shared") || st1.policies["two"] == st0.policies["two"] {
		t.Fatal("a changed store was kept")
	}
	close(release)
	if code := <-held; code != 200 {
		t.Fatalf("the request held across the reload: %d", code)
	}
	rc := st1.store("shared").s.Client()
	if n, err := rc.ZCard(t.Context(), "sluice:conc:{proxy:two}").Result(); err != nil || n != 0 {
		t.Fatalf("leases left in Redis after the held request: %d %v", n, err)
	}
	if resp, _ := get(t, c, newReq(t, "GET", p.url+"/x")); resp.StatusCode != 200 {
		t.Fatalf("through the new store: %d", resp.StatusCode)
	}
	if n := st1.policies["two"].sharedConc.Stats().Admitted; n != 1 {
		t.Fatalf("the new store's limit admitted %d, want 1", n)
	}
	if !waitFor(10*time.Second, func() bool { return st0.store("shared").s.Client().Ping(t.Context()).Err() != nil }) {
		t.Fatal("the old store was not closed within 10 s of the reload (drain_timeout 1s)")
	}
}

// With heartbeat set, the proxies count each other through Redis
// (sluice_store_replicas, the N of failure: local); PUT /limits refuses a
// shared policy, whose limit lives in every proxy's file.
func TestStoreHeartbeatAndAdmin(t *testing.T) {
	r := startRedis(t)
	up := okUpstream(t)
	text := strings.Replace(strings.ReplaceAll(sharedConcConfig, "REDIS", r.URL()), "failure: closed", "failure: local\n    heartbeat: 20ms", 1)
	a := start(t, text, up)
	start(t, text, up)
	if !waitFor(10*time.Second, func() bool { return value(t, scrape(t, a), "sluice_store_replicas", "store", "shared") == 2 }) {
		t.Fatal("the heartbeat did not count 2 replicas within 10 s")
	}
	c := client(t)
	req := newReq(t, "PUT", a.admin+"/limits/two")
	req.Body = io.NopCloser(strings.NewReader(`{"limit": 5}`))
	resp, body := get(t, c, req)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "shared through store") {
		t.Fatalf("PUT /limits on a shared policy: %d %s", resp.StatusCode, body)
	}
}
