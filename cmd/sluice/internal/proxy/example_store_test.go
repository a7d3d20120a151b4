package proxy

import (
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared-quota example, run as written on two proxies against a Redis
// that wants the password from the environment: one API key gets the
// shared burst of 60 (plus what refills at 2/s while the test runs) in
// all, not 60 per proxy. With Redis killed, failure: local keeps each
// proxy at half the quota, so that the two together still admit about
// the shared quota.
func TestExampleSharedQuotaTwoReplicas(t *testing.T) {
	r := startRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	err := rc.ConfigSet(t.Context(), "requirepass", "s3cret").Err()
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("REDIS_ADDR", r.Addr())
	t.Setenv("REDIS_PASSWORD", "s3cret")
	data, err := os.ReadFile("../../../../examples/proxy/shared-quota.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// start replaces UPSTREAM, which would cut ${API_UPSTREAM} short.
	text, up := strings.ReplaceAll(string(data), "${API_UPSTREAM}", "UPSTREAM"), okUpstream(t)
	a := start(t, text, up)
	b := start(t, text, up)
	c := client(t)

	// burst is the example's; each admission past it needs a refilled
	// token (rate/s in all), so the most admitted in elapsed is
	// burst + rate·elapsed, rounded up, and one for the token being
	// refilled when the test started.
	burst, rate := 60, 2.0
	run := func(key string) (admitted int, most int) {
		t0 := time.Now()
		for i := range 3 * burst {
			p := a
			if i%2 == 1 {
				p = b
			}
			req := newReq(t, "GET", p.url+"/api/x")
			req.Header.Set("X-API-Key", key)
			resp, _ := get(t, c, req)
			switch resp.StatusCode {
			case http.StatusOK:
				admitted++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
		}
		return admitted, burst + int(math.Ceil(rate*time.Since(t0).Seconds())) + 1
	}
	if n, most := run("alice"); n < burst || n > most {
		t.Fatalf("alice through two replicas: %d admitted, want between %d and %d (one shared quota; twice it would be %d)", n, burst, most, 2*burst)
	}

	r.Kill()
	if n, most := run("carol"); n < burst || n > most {
		t.Fatalf("carol with Redis dead (failure: local, replicas: 2): %d admitted, want between %d and %d (half the quota on each replica)", n, burst, most)
	}
}
