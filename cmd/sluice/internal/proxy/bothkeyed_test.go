package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A per-key bucket and a per-key concurrency limit are all or nothing: a
// request the key's concurrency limit refuses does not spend the key's
// token, and one over the key's rate takes no slot.
func TestPerKeyBothAllOrNothing(t *testing.T) {
	up, entered, hold := holdOnPath(t)
	p := start(t, `
routes:
  - name: api
    upstream: UPSTREAM
    policy: both
policies:
  - name: both
    key: header:X-Key
    rate: {rate: 0.001, burst: 2, per_key: true}
    per_key_concurrency: {limit: 1}
`, up)
	c := client(t)
	send := func(path string) int {
		req := newReq(t, "GET", p.url+path)
		req.Header.Set("X-Key", "alice")
		resp, _ := get(t, c, req)
		return resp.StatusCode
	}
	done := make(chan int)
	go func() { done <- send("/hold") }()
	<-entered
	pol := p.s.cur.Load().policies["both"]
	for range 3 {
		if code := send("/"); code != http.StatusTooManyRequests {
			t.Errorf("while alice's slot is taken: %d, want 429", code)
		}
	}
	if tok := pol.buckets.Tokens("alice"); tok < 0.99 || tok > 1.01 {
		t.Errorf("alice's tokens %.2f after 3 refusals by her concurrency limit, want 1 (untouched)", tok)
	}
	close(hold)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	if code := send("/"); code != 200 {
		t.Fatalf("with the slot free and a token left: %d, want 200", code)
	}
	if code := send("/"); code != http.StatusTooManyRequests {
		t.Fatalf("with no token left: %d, want 429", code)
	}
}

// bothPolicy builds a policy with a per-key bucket and a per-key
// concurrency limit, and the request state its permits are held in.
func bothPolicy(t testing.TB) (*policy, *reqState, context.Context) {
	c, err := ParseConfig("f.yaml", []byte(`
routes: [{name: a, upstream: "http://127.0.0.1:1", policy: both}]
policies:
  - name: both
    rate: {rate: 1000000000, burst: 1000000000, per_key: true}
    per_key_concurrency: {limit: 1000}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := c.buildPolicy(c.Policies[0], "policies[0]", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &reqState{}
	return pol, st, context.WithValue(context.Background(), stateKey{}, st)
}

func acquireRelease(t testing.TB, pol *policy, st *reqState, ctx context.Context) {
	st.permits = nil // a new request's state
	p, err := pol.perKey.Acquire(ctx, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p.Release(sluice.Success, time.Millisecond)
}

// An admission through both per-key limits allocates nothing of its own
// (it used to build a sluice.All per request: 4 allocations).
func TestPerKeyBothAllocatesNothing(t *testing.T) {
	pol, st, ctx := bothPolicy(t)
	acquireRelease(t, pol, st, ctx) // the key's limiters made
	if n := testing.AllocsPerRun(1000, func() { acquireRelease(t, pol, st, ctx) }); n != 0 {
		t.Errorf("%v allocations per admission, want 0", n)
	}
	if s := pol.perKeyConc.Stats(); s.Keys != 1 {
		t.Errorf("keys %d, want 1", s.Keys)
	}
}

func BenchmarkPerKeyBoth(b *testing.B) {
	pol, st, ctx := bothPolicy(b)
	b.ReportAllocs()
	for b.Loop() {
		acquireRelease(b, pol, st, ctx)
	}
}
