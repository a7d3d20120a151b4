package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// The breaker as a transcript: time is an argument, no clock. It counts
// failed round trips, not calls: the calls of one round trip, and calls
// never sent (trip 0), do not add up to open it.
func TestBreaker(t *testing.T) {
	b := newBreaker(3, 100)
	steps := []struct {
		now   int64
		ok    bool   // result of the call, if allowed
		trip  uint64 // its round trip
		allow bool
		state BreakerState
	}{
		{0, false, 1, true, BreakerClosed},
		{1, false, 2, true, BreakerClosed},
		{2, false, 3, true, BreakerOpen}, // third failed round trip in a row opens it
		{50, false, 4, false, BreakerOpen},
		{102, false, 4, true, BreakerOpen}, // cooldown over: a probe, which fails
		{150, true, 5, false, BreakerOpen},
		{202, true, 5, true, BreakerClosed}, // the next probe succeeds
		{203, false, 6, true, BreakerClosed},
		{204, true, 7, true, BreakerClosed}, // a success clears the streak
		{205, false, 8, true, BreakerClosed},
		{206, false, 8, true, BreakerClosed}, // the same round trip: counted once
		{206, false, 8, true, BreakerClosed},
		{207, false, 0, true, BreakerClosed}, // never sent: not counted
		{207, false, 0, true, BreakerClosed},
		{208, false, 7, true, BreakerClosed}, // older than one counted: not again
		{209, false, 9, true, BreakerClosed},
		{210, false, 10, true, BreakerOpen},
		{311, false, 0, true, BreakerOpen}, // a probe that failed unsent fails too
	}
	for i, st := range steps {
		got := b.allow(st.now)
		if got != st.allow {
			t.Fatalf("step %d: allow = %v, want %v", i, got, st.allow)
		}
		if got {
			b.done(st.now, st.ok, st.trip)
		}
		if b.current() != st.state {
			t.Fatalf("step %d: state %v, want %v", i, b.current(), st.state)
		}
	}
	if b.trips.Load() != 4 {
		t.Fatalf("trips %d, want 4", b.trips.Load())
	}
	// Half-open lets one probe at a time.
	b2 := newBreaker(1, 10)
	b2.allow(0)
	b2.done(0, false, 1)
	if !b2.allow(10) || b2.allow(11) {
		t.Fatal("half-open let two probes through")
	}
}

func TestConfigErrors(t *testing.T) {
	s := newStore(t, Config{})
	long := strings.Repeat("k", MaxKeyLen+1)
	cases := []struct {
		field string
		err   error
	}{
		{"Config.Timeout", func() error { _, err := Open(srv.URL(), Config{Timeout: time.Nanosecond}); return err }()},
		{"Config.BreakerThreshold", func() error { _, err := Open(srv.URL(), Config{BreakerThreshold: -1}); return err }()},
		{"Config.HeartbeatKey", func() error { _, err := Open(srv.URL(), Config{HeartbeatKey: long}); return err }()},
		{"url", func() error { _, err := Open("http://127.0.0.1:1", Config{}); return err }()},
		{"url", func() error { _, err := Open("redis://127.0.0.1:notaport/x/y", Config{}); return err }()},
		{"url", func() error { _, err := Open("redis+cluster://%zz", Config{}); return err }()},
		{"RateConfig.Rate", func() error { _, err := NewBuckets(s, RateConfig{Rate: 0, Burst: 1}); return err }()},
		{"RateConfig.Rate", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1e8, Burst: 1}); return err }()},
		{"RateConfig.Burst", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1, Burst: 0}); return err }()},
		{"RateConfig.Burst", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1e-6, Burst: 10}); return err }()}, // TTL 115 days
		{"RateConfig.Batch", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1, Burst: 5, Batch: 6}); return err }()},
		{"RateConfig.Prefix", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1, Burst: 5, Prefix: long}); return err }()},
		{"Failure", func() error { _, err := NewBuckets(s, RateConfig{Rate: 1, Burst: 5, Failure: 9}); return err }()},
		{"ConcurrencyConfig.Limit", func() error { _, err := NewConcurrency(s, ConcurrencyConfig{Key: "k", Limit: 0}); return err }()},
		{"ConcurrencyConfig.TTL", func() error {
			_, err := NewConcurrency(s, ConcurrencyConfig{Key: "k", Limit: 1, TTL: time.Millisecond})
			return err
		}()},
		{"ConcurrencyConfig.Key", func() error { _, err := NewConcurrency(s, ConcurrencyConfig{Limit: 1}); return err }()},
		{"ConcurrencyConfig.Key", func() error { _, err := NewConcurrency(s, ConcurrencyConfig{Key: long, Limit: 1}); return err }()},
		{"ConcurrencyConfig.PollMax", func() error {
			_, err := NewConcurrency(s, ConcurrencyConfig{Key: "k", Limit: 1, PollMin: 10 * time.Millisecond, PollMax: time.Millisecond})
			return err
		}()},
	}
	for _, c := range cases {
		var ce *sluice.ConfigError
		if !errors.As(c.err, &ce) || ce.Field != c.field || !errors.Is(c.err, sluice.ErrInvalidConfig) {
			t.Errorf("want a ConfigError naming %s, got %v", c.field, c.err)
		}
	}
	// A key too long for Redis, given at request time.
	b := newBuckets(t, s, RateConfig{Rate: 1, Burst: 1})
	if _, err := b.TryAcquire(long); !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "key") {
		t.Errorf("long key: %v", err)
	}
}

// A server that refuses scripting (here: EVAL, EVALSHA and SCRIPT renamed
// away, as on a locked-down or pre-5.0 server) fails Check with ErrScript;
// decisions meanwhile follow the failure policy.
func TestCheckRefusedScripts(t *testing.T) {
	rs, err := redistest.Start("--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "", "--rename-command", "SCRIPT", "")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s := openStore(t, rs.URL(), Config{Timeout: 200 * time.Millisecond}, false)
	if err := s.Check(t.Context()); !errors.Is(err, ErrScript) {
		t.Fatalf("Check: %v", err)
	}
	b := newBuckets(t, s, RateConfig{Rate: 1, Burst: 1, Failure: FailClosed})
	if _, err := b.TryAcquire("k"); !errors.Is(err, sluice.ErrStore) || !errors.Is(err, sluice.ErrCapacity) {
		t.Fatalf("decision with scripts refused: %v", err)
	}
	good := newStore(t, Config{Timeout: 200 * time.Millisecond})
	if err := good.Check(t.Context()); err != nil {
		t.Fatalf("Check on a good server: %v", err)
	}
}

// The reply parsers never panic: replies are built from fuzz input as
// go-redis would hand them over (nested arrays, integers, strings, nil).
func FuzzParseReply(f *testing.F) {
	f.Add([]byte{6, 1, 0, 1, 5, 1, 0, 1, 9, 1, 1, 1, 0})
	f.Add([]byte{3, 2, 'x', 1, 7})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := buildReply(data, 0)
		if r, err := parseGCRA(v); err == nil && (r.waitUs < 0 || r.remaining < 0) {
			t.Fatalf("accepted a negative field: %+v", r)
		}
		// The same reply as a merged call's, for 1 to 3 decisions.
		for n := 1; n <= 3; n++ {
			if arr, err := splitReply(v, n); err == nil {
				for _, e := range arr {
					if r := element(e); r.err == nil {
						_, _ = parseGCRA(r.val)
					}
				}
			}
		}
		var a [3]int64
		_ = parseInts(v, a[:])
	})
}

// buildReply decodes data into a reply value: an array (first byte its
// length), then per element a tag: 0 nil, 1 int64, 2 string, 3 nested
// array, 4 error, 5 float.
func buildReply(data []byte, depth int) (any, []byte) {
	if len(data) == 0 {
		return nil, data
	}
	n := int(data[0] % 10)
	data = data[1:]
	arr := make([]any, 0, n)
	for range n {
		if len(data) == 0 {
			break
		}
		tag := data[0] % 6
		data = data[1:]
		var x any
		switch tag {
		case 1:
			if len(data) > 0 {
				x = int64(int8(data[0])) * 1e15
				data = data[1:]
			}
		case 2:
			x = string(data[:min(len(data), 3)])
			data = data[min(len(data), 3):]
		case 3:
			if depth < 3 {
				x, data = buildReply(data, depth+1)
			}
		case 4:
			x = errors.New("ERR")
		case 5:
			x = 1.5
		}
		arr = append(arr, x)
	}
	return arr, data
}

func TestParseFailure(t *testing.T) {
	for _, f := range []Failure{FailOpen, FailClosed, FailLocal} {
		if g, err := ParseFailure(f.String()); err != nil || g != f {
			t.Errorf("ParseFailure(%q) = %v, %v", f.String(), g, err)
		}
	}
	if _, err := ParseFailure("sometimes"); !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "failure") {
		t.Errorf("ParseFailure(sometimes) = %v", err)
	}
}

// Redis's error about one key (it holds another type) says Redis is up:
// the breaker stays closed and the other keys are still decided by Redis.
// Counted as failures, three in a row opened it for every key. A refusal
// every call gets (out of memory) still opens it.
func TestBreakerIgnoresOneKeysError(t *testing.T) {
	rs, s := ownStore(t, Config{})
	b, err := NewBuckets(s, RateConfig{Rate: 100, Burst: 100, Failure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client().HSet(t.Context(), "sluice:rate:{bad}", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := b.TryAcquire("bad"); !errors.Is(err, sluice.ErrStore) {
			t.Fatalf("TryAcquire(bad) = %v, want sluice.ErrStore (its failure policy)", err)
		}
	}
	if st := s.Stats(); st.Breaker != BreakerClosed || st.Errors != 5 {
		t.Fatalf("after 5 errors about one key: breaker %v, %d errors; want closed, 5", st.Breaker, st.Errors)
	}
	if _, err := b.TryAcquire("good"); err != nil || b.LimiterStats().Fallbacks != 5 {
		t.Fatalf("TryAcquire(good) = %v with %d fallbacks; want admitted by Redis (5 fallbacks, the bad key's)", err, b.LimiterStats().Fallbacks)
	}

	// Out of memory: every write is refused.
	c := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(rs.URL(), "redis://")})
	defer c.Close()
	if err := c.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b.TryAcquire(fmt.Sprint("oom", i))
	}
	if st := s.Stats(); st.Breaker != BreakerOpen {
		t.Fatalf("after 5 out-of-memory refusals: breaker %v, want open", st.Breaker)
	}
}
