package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// What the defaults do: a request over its client's rate waits for a token,
// but only when the token comes within MaxWait (1s), and only while at
// most MaxWaitingPerKey (8) of that client's requests (1024 in all) wait;
// any other is answered 429 at once, with Retry-After. Here 20 requests
// arrive at once from one client of a 1.5-per-second bucket of burst 1:
// the first takes the burst, the second waits 667ms for the next token,
// and the 18 whose tokens would come after 1s are refused at once.
func ExampleConfig_defaultWait() {
	perIP, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1.5, Burst: 1}})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	h, err := httplimit.New(hello, httplimit.Config{PerKey: perIP}) // key: the client IP
	if err != nil {
		panic(err)
	}
	codes := make(chan int, 20)
	for range 20 {
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			codes <- w.Code
		}()
	}
	got := map[int]int{}
	for range 20 {
		got[<-codes]++
	}
	fmt.Println(got)
	// Output:
	// map[200:2 429:18]
}

// A per-client-IP token bucket in front of a handler, behind a load
// balancer at 10.0.0.1 whose X-Forwarded-For is trusted, plus a global
// concurrency limit.
func ExampleNew() {
	perIP, err := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) {
			return rate.NewBucket(rate.Config{Rate: 1, Burst: 2})
		},
		MaxKeys: 10000,
	})
	if err != nil {
		panic(err)
	}
	inFlight, err := concurrency.New(concurrency.Config{Limit: 100})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	h, err := httplimit.New(hello, httplimit.Config{
		PerKey:   perIP,
		Limiter:  inFlight,
		NoWait:   true,
		ClientIP: httplimit.IPConfig{TrustedProxies: []string{"10.0.0.1"}},
		Policy: &httplimit.RatePolicy{Quota: 2, Window: 2 * time.Second,
			Remaining: httplimit.BucketRemaining(perIP.Get)},
	})
	if err != nil {
		panic(err)
	}

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:4711"
		r.Header.Set("X-Forwarded-For", "192.0.2.1, 198.51.100.7") // the client wrote the first
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit-Policy: %s Retry-After: %q RateLimit: %q\n", w.Code,
			w.Header().Get("RateLimit-Policy"), w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	fmt.Println("rejected for rate:", h.Stats().Rejected[sluice.ReasonRate])
	// Output:
	// 200 RateLimit-Policy: "default";q=2;w=2 Retry-After: "" RateLimit: "\"default\";r=1;t=1"
	// 200 RateLimit-Policy: "default";q=2;w=2 Retry-After: "" RateLimit: "\"default\";r=0;t=2"
	// 429 RateLimit-Policy: "default";q=2;w=2 Retry-After: "1" RateLimit: "\"default\";r=0;t=1"
	// rejected for rate: 1
}

func ExampleNewClientIP() {
	ip, err := httplimit.NewClientIP(httplimit.IPConfig{
		TrustedProxies: []string{"10.0.0.0/8"},
		IPv6Prefix:     64,
	})
	if err != nil {
		panic(err)
	}
	for _, c := range []struct{ peer, xff string }{
		{"203.0.113.9:5000", "1.2.3.4"},                 // untrusted peer: the header is ignored
		{"10.0.0.1:5000", "1.2.3.4, 198.51.100.7"},      // the proxy saw 198.51.100.7
		{"10.0.0.1:5000", "198.51.100.7, 10.0.0.2"},     // two trusted hops
		{"10.0.0.1:5000", "2001:db8:1:2:aaaa::1"},       // masked to its /64
		{"10.0.0.1:5000", "1.2.3.4, garbage, 10.0.0.2"}, // the walk stops at garbage
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		r.Header.Set("X-Forwarded-For", c.xff)
		key, _ := ip.Key(r)
		fmt.Println(key)
	}
	_, err = httplimit.NewClientIP(httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/40"}})
	fmt.Println(err)
	// Output:
	// 203.0.113.9
	// 198.51.100.7
	// 198.51.100.7
	// 2001:db8:1:2::/64
	// 10.0.0.2
	// sluice/httplimit: IPConfig.TrustedProxies[0] = "10.0.0.0/40": must be a CIDR prefix or an IP address
}

// ValidPolicyName checks a RatePolicy.Name before New does, for a caller
// that takes names from elsewhere (a config file) and reports them there.
func ExampleValidPolicyName() {
	for _, name := range []string{"api-v2", "per client", `a"b`, "café"} {
		fmt.Printf("%q %v\n", name, httplimit.ValidPolicyName(name))
	}
	// Output:
	// "api-v2" true
	// "per client" true
	// "a\"b" false
	// "café" false
}

func ExampleRetryAfterSeconds() {
	for _, d := range []time.Duration{1200 * time.Millisecond, 100 * time.Microsecond, 3 * time.Second, 0} {
		fmt.Println(d, "->", httplimit.RetryAfterSeconds(d))
	}
	// Output:
	// 1.2s -> 2
	// 100µs -> 1
	// 3s -> 3
	// 0s -> 0
}

func ExampleStatus() {
	fmt.Println(httplimit.Status(sluice.Reject(sluice.ReasonRate, time.Second)))
	fmt.Println(httplimit.Status(sluice.Reject(sluice.ReasonQueueFull, 0)))
	fmt.Println(httplimit.Status(&httplimit.Rejection{Err: sluice.Reject(sluice.ReasonLimit, 0), PerKey: true}))
	// Output:
	// 429
	// 503
	// 429
}

// Dry run measures what a policy would do to real traffic before it is
// enforced.
func ExampleConfig_dryRun() {
	b, _ := rate.NewBucket(rate.Config{Rate: 0.1, Burst: 1})
	h, _ := httplimit.New(http.NotFoundHandler(), httplimit.Config{Limiter: b, DryRun: true})
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	s := h.Stats()
	fmt.Println("admitted:", s.Admitted, "would reject:", s.WouldRejectTotal())
	// Output:
	// admitted: 5 would reject: 4
}

func ExampleHeaderKey() {
	perKey, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 0.1, Burst: 1}) },
	})
	h, _ := httplimit.New(http.NotFoundHandler(), httplimit.Config{
		PerKey: perKey, Key: httplimit.HeaderKey("X-Api-Key"), NoWait: true,
	})
	for _, key := range []string{"alice", "alice", "bob", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%q: %d\n", key, w.Code)
	}
	fmt.Println("fallback keys:", h.Stats().FallbackKeys)
	// Output:
	// "alice": 404
	// "alice": 429
	// "bob": 404
	// "": 404
	// fallback keys: 1
}

// OnReject replaces the response to a rejected request; here with the
// draft's "quota-exceeded" problem type. Retry-After is already set.
func ExampleConfig_onReject() {
	b, _ := rate.NewBucket(rate.Config{Rate: 0.5, Burst: 1})
	h, _ := httplimit.New(http.NotFoundHandler(), httplimit.Config{
		Limiter: b,
		NoWait:  true,
		OnReject: func(w http.ResponseWriter, r *http.Request, err error) {
			code := httplimit.Status(err)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","status":%d}`, code)
		},
	})
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	// Output:
	// 404  404 page not found
	//
	// 429 2 {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","status":429}
}

// PatternKey limits each route of a ServeMux separately: wrap each handler,
// inside the mux, so that the matched pattern is known.
func ExamplePatternKey() {
	perRoute, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 0.1, Burst: 1}) },
	})
	limit := func(next http.Handler) http.Handler {
		h, err := httplimit.New(next, httplimit.Config{PerKey: perRoute, Key: httplimit.PatternKey, NoWait: true})
		if err != nil {
			panic(err)
		}
		return h
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", limit(ok))
	mux.Handle("GET /users/{id}", limit(ok))
	for _, path := range []string{"/items/1", "/items/2", "/users/1"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, w.Code)
	}
	// Output:
	// /items/1 200
	// /items/2 429
	// /users/1 200
}

// PathKey and MethodKey key by what the request asks for; a path longer
// than MaxKeyLen is no usable key and falls back to the shared key.
func ExamplePathKey() {
	for _, path := range []string{"/items/1", "", "/" + strings.Repeat("x", httplimit.MaxKeyLen)} {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = path
		key, ok := httplimit.PathKey(r)
		fmt.Printf("%.10q %v\n", key, ok)
	}
	// Output:
	// "/items/1" true
	// "" false
	// "" false
}

func ExampleMethodKey() {
	for _, m := range []string{"POST", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method = m
		fmt.Println(httplimit.MethodKey(r))
	}
	// Output:
	// POST true
	// GET true
}

// Addr gives the client's address itself, for logging or an allow list;
// Key is the same address as a limiter key.
func ExampleClientIP_Addr() {
	ip, err := httplimit.NewClientIP(httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "[2001:db8::7]:443")
	a, ok := ip.Addr(r)
	fmt.Println(a, ok, a.Is6())
	// Output:
	// 2001:db8::7 true true
}

// Peer tells a proxy whether to keep the forwarding chain a request came
// with: only a trusted peer's.
func ExampleClientIP_Peer() {
	ip, err := httplimit.NewClientIP(httplimit.IPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		panic(err)
	}
	for _, remote := range []string{"10.0.0.1:5000", "[::ffff:203.0.113.9]:5000", "pipe"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		peer, trusted := ip.Peer(r)
		fmt.Println(peer, peer.IsValid(), trusted)
	}
	// Output:
	// 10.0.0.1 true true
	// 203.0.113.9 true false
	// invalid IP false false
}

// Reject is the default answer to a request that was not admitted; an
// OnReject that logs can end with it.
func ExampleWriteRejection() {
	for _, err := range []error{
		&httplimit.Rejection{Err: sluice.Reject(sluice.ReasonRate, time.Second), PerKey: true, Key: "alice"},
		sluice.Reject(sluice.ReasonQueueFull, 0),
	} {
		w := httptest.NewRecorder()
		httplimit.WriteRejection(w, httptest.NewRequest("GET", "/", nil), err)
		fmt.Printf("%d %q\n", w.Code, w.Body.String())
	}
	// Output:
	// 429 "Too Many Requests\n"
	// 503 "Service Unavailable\n"
}

// BucketRemaining reads what is left of a token bucket for the RateLimit
// field of admitted responses: here one global bucket.
func ExampleBucketRemaining() {
	b, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 5})
	if err != nil {
		panic(err)
	}
	h, err := httplimit.New(http.NotFoundHandler(), httplimit.Config{
		Limiter: b,
		Policy: &httplimit.RatePolicy{Name: "api", Quota: 5, Window: 5 * time.Second,
			Remaining: httplimit.BucketRemaining(func(string) (*rate.Bucket, error) { return b, nil })},
	})
	if err != nil {
		panic(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	fmt.Println(w.Header().Get("RateLimit"))
	// Output:
	// "api";q=5;w=5
	// "api";r=4;t=1
}

// Stats counts what the middleware did, for metrics or a health page.
func ExampleHandler_Stats() {
	inFlight, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		panic(err)
	}
	var h *httplimit.Handler
	h, err = httplimit.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While this request holds the only slot, another is turned away.
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		http.Error(w, "upstream failed", http.StatusBadGateway)
	}), httplimit.Config{Limiter: inFlight, NoWait: true})
	if err != nil {
		panic(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	s := h.Stats()
	fmt.Println("requests:", s.Requests, "admitted:", s.Admitted, "dropped:", s.Dropped)
	fmt.Println("rejected:", s.RejectedTotal(), "for", sluice.ReasonLimit, s.Rejected[sluice.ReasonLimit])
	// Output:
	// requests: 2 admitted: 1 dropped: 1
	// rejected: 1 for limit 1
}

// The recommended setup for a service: the adaptive Little limit behind a
// short LIFO queue whose wait is bounded to four mean service times. The
// limit learns the service's concurrency from the requests it serves; a
// request the service has no room for is answered 503 within those four
// service times, with Retry-After.
func Example_recommended() {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })

	little, err := adaptive.NewLittle(adaptive.LittleConfig{})
	if err != nil {
		panic(err)
	}
	inFlight, err := concurrency.New(concurrency.Config{
		Algorithm:       little,
		Discipline:      concurrency.LIFO,
		MaxQueue:        50,
		MaxWaitServices: 4,
	})
	if err != nil {
		panic(err)
	}
	h, err := httplimit.New(mux, httplimit.Config{Limiter: inFlight})
	if err != nil {
		panic(err)
	}

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Print(w.Code, " ", w.Body.String())
	fmt.Println("limit before the first estimate:", inFlight.Stats().Limit)
	// Output:
	// 200 hello
	// limit before the first estimate: 20
}
