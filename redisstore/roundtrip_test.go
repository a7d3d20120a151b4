package redisstore

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// busyScript keeps Redis busy for ARGV[1] microseconds (by Redis's own
// clock) and returns ARGV[2]: a slow round trip on demand.
var busyScript = redis.NewScript(`
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
	t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1])
return ARGV[2]`)

// echoScript returns ARGV[1].
var echoScript = redis.NewScript(`return ARGV[1]`)

// handCall is a call put in the queue by hand, with its own deadline, as
// if a caller with a longer timeout had queued it.
func handCall(s *Store, script *redis.Script, giveUpIn time.Duration, args ...any) *call {
	c := getCall(script)
	c.keys, c.args = []string{}, args
	c.deadline = s.now() + int64(giveUpIn) + int64(min(s.cfg.Timeout/2, 2*time.Millisecond))
	c.state.Store(callQueued)
	c.trip.Store(0)
	return c
}

// occupy hands the store's only flusher a call and waits until it has
// taken it, so that the calls made next queue behind it. It also counts
// one call pending for as long as the test runs, so that the calls made
// next queue instead of going direct.
func occupy(t *testing.T, s *Store, c *call) {
	t.Helper()
	s.pending.Add(1)
	t.Cleanup(func() { s.pending.Add(-1) })
	s.queue <- c
	for c.state.Load() != callTaken {
		runtime.Gosched()
	}
}

// A round trip lasts until the latest of its calls gives up, not the
// earliest: a call with little time left does not cut short the socket
// for calls sent with it that have plenty. The first call here gives up
// in 20 ms, the others in 10 s, and Redis takes 200 ms: armed at the
// earliest, the round trip failed all of them.
func TestRoundTripLastsForItsLatestCall(t *testing.T) {
	s := newStore(t, Config{Timeout: 10 * time.Second})
	for _, sc := range []*redis.Script{busyScript, echoScript} {
		if err := sc.Load(t.Context(), s.Client()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	batch := []*call{handCall(s, echoScript, 20*time.Millisecond, "soon")}
	batch = append(batch, handCall(s, busyScript, 10*time.Second, 200_000, "slow"))
	for i := range 25 {
		batch = append(batch, handCall(s, echoScript, 10*time.Second, fmt.Sprint(i)))
	}
	var p pipe
	s.send(&p, batch)
	for i, c := range batch {
		r := <-c.done
		want := fmt.Sprint(i - 2)
		switch i {
		case 0:
			want = "soon" // its caller had given up by then; the late answer is harmless
		case 1:
			want = "slow"
		}
		if r.err != nil || r.val != want {
			t.Fatalf("call %d: %v, %v; want %q", i, r.val, r.err, want)
		}
	}
}

// The breaker counts failed round trips, not calls: the 8 calls of one
// round trip that timed out count once, and calls that timed out queued
// behind a stuck round trip, never sent, count not at all (nor in Calls
// and the round-trip histogram: they never went to Redis).
func TestBreakerCountsRoundTrips(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s := openStore(t, rs.URL(), Config{Timeout: 100 * time.Millisecond, Pipelines: 1}, false)
	for _, sc := range []*redis.Script{busyScript, echoScript} {
		if err := sc.Load(t.Context(), s.Client()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 8
	calls := func(script *redis.Script, args ...any) []error {
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { _, errs[i] = s.eval(script, []string{}, args...) })
		}
		wg.Wait()
		return errs
	}
	histCount := func() (n uint64) {
		for _, b := range s.Stats().RoundTrip {
			n += b.Count
		}
		return n
	}

	// Redis paused: the flusher's round trip is stuck, the calls queued
	// behind it give up unsent.
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	stuck := handCall(s, echoScript, 10*time.Second, "stuck")
	occupy(t, s, stuck)
	before, hist := s.Stats(), histCount()
	for i, err := range calls(echoScript, "x") { // Redis paused: they give up queued
		if err != errUnsent {
			t.Fatalf("queued call %d: %v, want it failed unsent", i, err)
		}
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	if r := <-stuck.done; r.err != nil {
		t.Fatal(r.err)
	}
	st := s.Stats()
	if n := st.Calls - before.Calls; n != 0 {
		t.Fatalf("Calls counts %d calls that never went to Redis", n)
	}
	if n := histCount() - hist; n != 0 {
		t.Fatalf("the round-trip histogram counts %d calls that never went to Redis", n)
	}
	if st.Timeouts-before.Timeouts != callers {
		t.Fatalf("%d timeouts, want %d", st.Timeouts-before.Timeouts, callers)
	}
	if f := s.br.failures.Load(); f != 0 || st.Breaker != BreakerClosed {
		t.Fatalf("breaker %v with %d failures after calls that were never sent", st.Breaker, f)
	}

	// Redis paused again: the calls queue behind another call, then all
	// go in one round trip, which Redis answers after they gave up.
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	before, hist = s.Stats(), histCount()
	stuck = handCall(s, echoScript, 10*time.Second, "stuck")
	s.queue <- stuck // behind the calls given up above, if the flusher has not dropped them yet
	for stuck.state.Load() != callTaken {
		runtime.Gosched()
	}
	errs := make(chan []error, 1)
	go func() { errs <- calls(busyScript, 150_000, "late") }()
	for len(s.queue) < callers {
		runtime.Gosched()
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	for i, err := range <-errs {
		if err != ErrTimeout {
			t.Fatalf("call %d: %v, want ErrTimeout after it was sent", i, err)
		}
	}
	if r := <-stuck.done; r.err != nil {
		t.Fatal(r.err)
	}
	st = s.Stats()
	if n, trips := st.Calls-before.Calls, st.RoundTrips-before.RoundTrips; n != callers || trips != 2 {
		t.Fatalf("%d calls in %d round trips, want %d in 2 (the stuck one and theirs)", n, trips, callers)
	}
	if n := histCount() - hist; n != callers {
		t.Fatalf("the round-trip histogram counts %d calls, want %d", n, callers)
	}
	if f := s.br.failures.Load(); f != 1 || st.Breaker != BreakerClosed || st.BreakerTrips != 0 {
		t.Fatalf("breaker %v, %d trips, %d failures after one failed round trip, want closed with 1", st.Breaker, st.BreakerTrips, f)
	}
}

// On a server that refuses keys of several slots in one command (a
// Cluster node, or a proxy, behind a plain redis:// address), a merged
// decision call gets CROSSSLOT: its decisions are resent one script call
// each, and the store stops merging.
func TestCrossSlotStopsMerging(t *testing.T) {
	rs, err := redistest.StartClusterNode()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s := openStore(t, rs.URL(), Config{Timeout: time.Second, Pipelines: 1}, false)
	if !s.merge.Load() {
		t.Fatal("a store over one address does not merge")
	}
	b := newBuckets(t, s, RateConfig{Rate: 0.001, Burst: 2, OverLimitCache: -1, Prefix: "xs:"})
	if _, err := b.Allow("warm", 1); err != nil { // loads the script
		t.Fatal(err)
	}
	const callers = 8
	decide := func() error {
		var wg sync.WaitGroup
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				for range 3 {
					if _, err := b.Allow(fmt.Sprint("k", i), 1); err != nil {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	// The decisions queue behind a stuck call, so that they go in one
	// pipeline: merged, and refused.
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	stuck := handCall(s, echoScript, 10*time.Second, "stuck")
	occupy(t, s, stuck)
	done := make(chan error, 1)
	go func() { done <- decide() }()
	for len(s.queue) < callers {
		runtime.Gosched()
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := <-stuck.done; r.err != nil {
		t.Fatal(r.err)
	}
	st := s.Stats()
	if st.CrossSlot != 1 || s.merge.Load() {
		t.Fatalf("CrossSlot %d, merge %v: want 1 refusal, then no merging", st.CrossSlot, s.merge.Load())
	}
	if err := decide(); err != nil { // no more merging, no more refusals
		t.Fatal(err)
	}
	if st := s.Stats(); st.CrossSlot != 1 || st.Errors != 0 {
		t.Fatalf("after merging stopped: CrossSlot %d, %d errors", st.CrossSlot, st.Errors)
	}
	// Each key admitted its burst of 2 of 6, whichever way its decisions went.
	for i := range callers {
		r, err := b.Allow(fmt.Sprint("k", i), 1)
		if err != nil || r.Allowed {
			t.Fatalf("key k%d after 6 decisions on a burst of 2: %+v, %v", i, r, err)
		}
	}
}
