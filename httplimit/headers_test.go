package httplimit

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

func TestStatusByReason(t *testing.T) {
	tests := []struct {
		reason sluice.Reason
		perKey bool
		want   int
	}{
		{sluice.ReasonRate, false, 429},
		{sluice.ReasonTooLarge, false, 429},
		{sluice.ReasonThrottled, false, 429},
		{sluice.ReasonLimit, false, 503},
		{sluice.ReasonQueueFull, false, 503},
		{sluice.ReasonQueueTimeout, false, 503},
		{sluice.ReasonDeadline, false, 503},
		{sluice.ReasonShed, false, 503},
		{sluice.ReasonUnknown, false, 503},
		{sluice.ReasonStore, false, 503},
		// The per-key limit is the client's own share: 429, unless its
		// shared store did not answer (the client did nothing wrong).
		{sluice.ReasonRate, true, 429},
		{sluice.ReasonLimit, true, 429},
		{sluice.ReasonQueueTimeout, true, 429},
		{sluice.ReasonStore, true, 503},
	}
	for _, tt := range tests {
		name := tt.reason.String() + "/perkey=" + strconv.FormatBool(tt.perKey)
		t.Run(name, func(t *testing.T) {
			var cfg Config
			l := rejecter{tt.reason, 1500 * time.Millisecond}
			if tt.perKey {
				m, err := keyed.New(keyed.Config[rejecter]{New: func(string) (rejecter, error) { return l, nil }})
				if err != nil {
					t.Fatal(err)
				}
				cfg.PerKey = m
			} else {
				cfg.Limiter = l
			}
			h := mustNew(t, okHandler, cfg)
			w := serve(h, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.want {
				t.Errorf("status %d, want %d", w.Code, tt.want)
			}
			if got := w.Header().Get("Retry-After"); got != "2" {
				t.Errorf("Retry-After %q, want 2 (1.5s rounded up)", got)
			}
			s := h.Stats()
			if s.Rejected[tt.reason] != 1 || s.RejectedTotal() != 1 {
				t.Errorf("Stats.Rejected = %v, want 1 for %v", s.Rejected, tt.reason)
			}
			if wantPK := map[bool]uint64{true: 1}[tt.perKey]; s.RejectedPerKey != wantPK {
				t.Errorf("Stats.RejectedPerKey = %d, want %d", s.RejectedPerKey, wantPK)
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Nanosecond, 1},
		{100 * time.Microsecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{1200 * time.Millisecond, 2},
		{time.Second + time.Nanosecond, 2},
		{59999 * time.Millisecond, 60},
		{time.Hour, 3600},
		{1<<63 - 1, 9223372037},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestNoRetryAfterWithoutHint(t *testing.T) {
	h := mustNew(t, okHandler, Config{Limiter: rejecter{sluice.ReasonLimit, 0}})
	w := serve(h, httptest.NewRequest("GET", "/", nil))
	if w.Code != 503 || w.Header()["Retry-After"] != nil {
		t.Errorf("status %d, Retry-After %q; want 503 and none", w.Code, w.Header()["Retry-After"])
	}
	// A 429 under a policy still says nothing remains; without a hint it
	// cannot say when more comes, so "t" is left out.
	h = mustNew(t, okHandler, Config{Limiter: rejecter{sluice.ReasonRate, 0}, Policy: &RatePolicy{Quota: 1, Window: time.Second}})
	w = serve(h, httptest.NewRequest("GET", "/", nil))
	if got := w.Header()["Ratelimit"]; w.Code != 429 || w.Header()["Retry-After"] != nil || len(got) != 1 || got[0] != `"default";r=0` {
		t.Errorf("status %d, Retry-After %q, RateLimit %q; want 429, none, \"default\";r=0", w.Code, w.Header()["Retry-After"], got)
	}
}

// sfItem is one member of a structured-field list: "name";k=v;...
type sfItem struct {
	name   string
	params map[string]string
}

// parseSFList parses the subset of RFC 8941 lists the RateLimit fields use:
// string items with token or integer parameters.
func parseSFList(t *testing.T, v string) []sfItem {
	t.Helper()
	var items []sfItem
	for _, member := range strings.Split(v, ",") {
		parts := strings.Split(strings.TrimSpace(member), ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil || !strings.HasPrefix(parts[0], `"`) {
			t.Fatalf("item %q is not an sf-string", parts[0])
		}
		it := sfItem{name: name, params: map[string]string{}}
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(p, "=")
			if !ok || k == "" || k != strings.ToLower(k) {
				t.Fatalf("bad parameter %q in %q", p, v)
			}
			it.params[k] = val
		}
		items = append(items, it)
	}
	return items
}

func intParam(t *testing.T, it sfItem, k string) int64 {
	t.Helper()
	v, ok := it.params[k]
	if !ok {
		t.Fatalf("item %q has no %s parameter", it.name, k)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a non-negative sf-integer", k, v)
	}
	return n
}

func TestRateLimitFields(t *testing.T) {
	// A burst of 2 refilled at 0.5/s: the third request waits 2s for a token.
	m := perIPBuckets(t, rate.Config{Rate: 0.5, Burst: 2})
	h := mustNew(t, okHandler, Config{
		PerKey: m,
		NoWait: true,
		Policy: &RatePolicy{Name: "per-ip", Quota: 2, Window: 4 * time.Second},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	var last *http.Response
	for range 3 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last = resp
		pol := parseSFList(t, resp.Header.Get("RateLimit-Policy"))
		if len(pol) != 1 || pol[0].name != "per-ip" || intParam(t, pol[0], "q") != 2 || intParam(t, pol[0], "w") != 4 {
			t.Fatalf("RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
		}
	}
	if last.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429", last.StatusCode)
	}
	ra, err := strconv.Atoi(last.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 seconds", last.Header.Get("Retry-After"))
	}
	rl := parseSFList(t, last.Header.Get("RateLimit"))
	if len(rl) != 1 || rl[0].name != "per-ip" || intParam(t, rl[0], "r") != 0 || intParam(t, rl[0], "t") != int64(ra) {
		t.Fatalf("RateLimit %q with Retry-After %d", last.Header.Get("RateLimit"), ra)
	}
	if ct := last.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
}

// BucketRemaining reads real buckets, each driven into the state of its
// row in virtual time (so the reading is at the instant the row says), and
// tokens, checked first, is what the bucket holds then.
func TestBucketRemaining(t *testing.T) {
	take := func(n int) func(*testing.T, *rate.Bucket) {
		return func(t *testing.T, b *rate.Bucket) {
			if !b.AllowN(n) {
				t.Fatalf("AllowN(%d) refused", n)
			}
		}
	}
	tests := []struct {
		name      string
		cfg       rate.Config
		drive     func(*testing.T, *rate.Bucket)
		tokens    float64
		wantN     int
		wantReset time.Duration
	}{
		{"full", rate.Config{Rate: 1, Burst: 3}, nil, 3, 3, 0},
		{"one taken", rate.Config{Rate: 1, Burst: 3}, take(1), 2, 2, time.Second},
		{"half a token", rate.Config{Rate: 2, Burst: 3}, func(t *testing.T, b *rate.Bucket) {
			take(3)(t, b)
			time.Sleep(250 * time.Millisecond)
		}, 0.5, 0, 1250 * time.Millisecond},
		{"empty at 7/s", rate.Config{Rate: 7, Burst: 7}, take(7), 0, 0, time.Second + 1}, // 142,857,143 ns a token
		// Reservations waiting: nothing left, and the bucket is full again
		// only once they are paid too, at 7 s (it said 3 s, counted from
		// an empty bucket, and sent clients back too early).
		{"in debt", rate.Config{Rate: 1, Burst: 3}, func(t *testing.T, b *rate.Bucket) {
			take(3)(t, b)
			for _, n := range []int{3, 1} {
				if _, ok := b.Reserve(n, time.Hour); !ok {
					t.Fatalf("Reserve(%d) refused", n)
				}
			}
		}, -4, 0, 7 * time.Second},
		{"rate 0, two taken", rate.Config{Rate: 0, Burst: 3}, take(2), 1, 1, -1}, // never refills
		{"rate 0, full", rate.Config{Rate: 0, Burst: 3}, nil, 3, 3, 0},
		{"rate 0, empty", rate.Config{Rate: 0, Burst: 3}, take(3), 0, 0, -1},
		{"rate Inf", rate.Config{Rate: rate.Inf, Burst: 5}, take(5), 5, 5, 0},                     // takes nothing
		{"refills after the end of time", rate.Config{Rate: 1e-300, Burst: 5}, take(5), 0, 0, -1}, // counted as rate 0
		{"closed: burst 0", rate.Config{Rate: 1, Burst: 1}, func(t *testing.T, b *rate.Bucket) {
			if err := b.SetBurst(0); err != nil {
				t.Fatal(err)
			}
		}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := bucket(t, tt.cfg)
				if tt.drive != nil {
					tt.drive(t, b)
				}
				if tk := b.Tokens(); tk != tt.tokens {
					t.Fatalf("the bucket holds %v tokens, want %v", tk, tt.tokens)
				}
				n, reset := BucketRemaining(func(string) (*rate.Bucket, error) { return b, nil })("k")
				if n != tt.wantN || reset != tt.wantReset {
					t.Errorf("%+v: BucketRemaining = %d, %v; want %d, %v", tt.cfg, n, reset, tt.wantN, tt.wantReset)
				}
			})
		})
	}
	// A key without a bucket has nothing left, and no reset.
	for _, get := range []func(string) (*rate.Bucket, error){
		func(string) (*rate.Bucket, error) { return nil, errors.New("no bucket") },
		func(string) (*rate.Bucket, error) { return nil, nil },
	} {
		if n, reset := BucketRemaining(get)("k"); n != 0 || reset != -1 {
			t.Errorf("BucketRemaining without a bucket = %d, %v; want 0, -1", n, reset)
		}
	}
}

// The same fields whether the per-key buckets are a keyed.Map of
// rate.Buckets (BucketRemaining) or a keyed.Buckets (its Remaining method).
func TestRateLimitOnAdmittedResponses(t *testing.T) {
	for _, lean := range []bool{false, true} {
		t.Run(map[bool]string{false: "keyed.Map", true: "keyed.Buckets"}[lean], func(t *testing.T) {
			rateLimitOnAdmitted(t, lean)
		})
	}
}

func rateLimitOnAdmitted(t *testing.T, lean bool) {
	synctest.Test(t, func(t *testing.T) {
		cfg := rate.Config{Rate: 1, Burst: 3}
		var perKey Keyed
		var remaining func(string) (int, time.Duration)
		if lean {
			b, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: cfg})
			if err != nil {
				t.Fatal(err)
			}
			perKey, remaining = b, b.Remaining
		} else {
			m := perIPBuckets(t, cfg)
			perKey, remaining = m, BucketRemaining(m.Get)
		}
		h := mustNew(t, okHandler, Config{
			PerKey: perKey,
			NoWait: true,
			Policy: &RatePolicy{Quota: 3, Window: 3 * time.Second, Remaining: remaining},
		})
		var got []string
		for range 4 {
			w := serve(h, httptest.NewRequest("GET", "/", nil))
			got = append(got, strconv.Itoa(w.Code)+" "+w.Header().Get("RateLimit"))
		}
		time.Sleep(1500 * time.Millisecond) // one token back, half of the next
		w := serve(h, httptest.NewRequest("GET", "/", nil))
		got = append(got, strconv.Itoa(w.Code)+" "+w.Header().Get("RateLimit"))
		want := []string{
			`200 "default";r=2;t=1`,
			`200 "default";r=1;t=2`,
			`200 "default";r=0;t=3`,
			`429 "default";r=0;t=1`,
			`200 "default";r=0;t=3`, // 1.5 tokens, one taken: 2.5 s to full, rounded up
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, v := range got {
			_, field, _ := strings.Cut(v, " ")
			it := parseSFList(t, field)
			if len(it) != 1 || it[0].name != "default" {
				t.Errorf("RateLimit %q does not parse back", field)
			}
			intParam(t, it[0], "r")
			intParam(t, it[0], "t")
		}
	})
}

// A global token bucket whose wait would pass its MaxWait rejects with
// queue_timeout, but it is still a rate limit: the client sent too much, so
// the answer is 429, not the 503 of a busy server.
func TestStatusGlobalBucketWaitIs429(t *testing.T) {
	b, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 1, MaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, okHandler, Config{Limiter: b})
	if w := serve(h, httptest.NewRequest("GET", "/", nil)); w.Code != 200 {
		t.Fatalf("first request: status %d, want 200", w.Code)
	}
	w := serve(h, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second request: status %d, Retry-After %q; want 429, 1", w.Code, w.Header().Get("Retry-After"))
	}
	if got := b.Stats().Rejected[sluice.ReasonQueueTimeout]; got != 1 {
		t.Fatalf("bucket counted %d queue_timeout rejections, want 1", got)
	}
}

// FuzzRejectHeaders: for any hint, Retry-After rounds up to whole seconds
// and a 429 under a policy carries a RateLimit field that parses, says
// nothing remains, and agrees with Retry-After; for any quota left and
// reset, an admitted response's RateLimit field parses.
func FuzzRejectHeaders(f *testing.F) {
	f.Add(int64(1500*time.Millisecond), 3, int64(-1))
	f.Add(int64(0), -5, int64(0))
	f.Add(int64(math.MaxInt64), math.MaxInt, int64(math.MaxInt64))
	f.Add(int64(math.MinInt64), math.MinInt, int64(1))
	f.Fuzz(func(t *testing.T, hint int64, remaining int, reset int64) {
		d := time.Duration(hint)
		secs := RetryAfterSeconds(d)
		switch {
		case d <= 0 && secs != 0:
			t.Fatalf("RetryAfterSeconds(%v) = %d, want 0", d, secs)
		case d > 0 && (secs < 1 || time.Duration(secs-1)*time.Second >= d || float64(secs) < d.Seconds()):
			t.Fatalf("RetryAfterSeconds(%v) = %d, want it rounded up", d, secs)
		}
		h := http.Header{}
		setRejectHeaders(h, d, http.StatusTooManyRequests, `"p"`)
		it := parseSFList(t, h.Get("RateLimit"))
		if len(it) != 1 || it[0].name != "p" || intParam(t, it[0], "r") != 0 {
			t.Fatalf("RateLimit %q", h.Get("RateLimit"))
		}
		if ra := h.Get("Retry-After"); ra != it[0].params["t"] || (ra == "") != (secs == 0) {
			t.Fatalf("hint %v: Retry-After %q, RateLimit %q", d, ra, h.Get("RateLimit"))
		}

		it = parseSFList(t, rateLimitField(`"p"`, remaining, time.Duration(reset)))
		if len(it) != 1 || intParam(t, it[0], "r") != int64(max(remaining, 0)) {
			t.Fatalf("rateLimitField(%d, %v) = %+v", remaining, time.Duration(reset), it)
		}
		if _, hasT := it[0].params["t"]; hasT != (reset >= 0) || (hasT && intParam(t, it[0], "t") != RetryAfterSeconds(time.Duration(reset))) {
			t.Fatalf("rateLimitField(%d, %v) = %+v", remaining, time.Duration(reset), it)
		}
	})
}

// SetPolicy changes the RateLimit-Policy field of later responses, and
// refuses what New would, changing nothing.
func TestSetPolicy(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, okHandler, Config{Limiter: lim, Policy: &RatePolicy{Name: "api", Quota: 5, Window: time.Second}})
	field := func() string { return serve(h, httptest.NewRequest("GET", "/", nil)).Header().Get("RateLimit-Policy") }
	if got := field(); got != `"api";q=5;w=1` {
		t.Fatalf("before: %q", got)
	}
	if err := h.SetPolicy(9, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		q int
		w time.Duration
	}{{0, time.Second}, {9, 1500 * time.Millisecond}, {9, 0}} {
		if err := h.SetPolicy(bad.q, bad.w); !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("SetPolicy(%d, %v) = %v, want ErrInvalidConfig", bad.q, bad.w, err)
		}
	}
	if got := field(); got != `"api";q=9;w=2` {
		t.Errorf("after: %q", got)
	}
	if err := mustNew(t, okHandler, Config{Limiter: lim}).SetPolicy(1, time.Second); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("SetPolicy without a Policy = %v", err)
	}
}
