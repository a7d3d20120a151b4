package keyed_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

func mustBuckets(t testing.TB, cfg keyed.BucketsConfig) *keyed.Buckets {
	t.Helper()
	b, err := keyed.NewBuckets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBucketsConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   keyed.BucketsConfig
		field string
	}{
		{"negative rate", keyed.BucketsConfig{Bucket: rate.Config{Rate: -1, Burst: 1}}, "Bucket.Rate"},
		{"NaN rate", keyed.BucketsConfig{Bucket: rate.Config{Rate: math.NaN(), Burst: 1}}, "Bucket.Rate"},
		{"negative burst", keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: -1}}, "Bucket.Burst"},
		{"negative MaxWait", keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1, MaxWait: -1}}, "MaxWait"},
		{"burst too long to fill", keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 2e10}}, "BucketsConfig.Bucket.Burst"},
		{"burst left out", keyed.BucketsConfig{Bucket: rate.Config{Rate: 10}}, "BucketsConfig.Bucket.Burst"},
		{"negative MaxKeys", keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: -1}, "MaxKeys"},
		{"negative IdleTimeout", keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, IdleTimeout: -1}, "IdleTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keyed.NewBuckets(tc.cfg)
			if !errors.Is(err, sluice.ErrInvalidConfig) || !contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want sluice.ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
}

func TestBucketsArithmetic(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 2}})
	for i, step := range []struct {
		at   time.Duration
		key  string
		want bool
	}{
		{0, "a", true}, {0, "a", true}, {0, "a", false}, // a burst of 2
		{0, "b", true},                      // keys are independent
		{99 * time.Millisecond, "a", false}, // 1 token per 100ms
		{100 * time.Millisecond, "a", true},
		{100 * time.Millisecond, "a", false},
		{time.Hour, "a", true}, {time.Hour, "a", true}, {time.Hour, "a", false}, // idle time beyond the burst is lost
	} {
		if got := b.AllowAt(t0.Add(step.at), step.key); got != step.want {
			t.Fatalf("step %d: AllowAt(+%v, %s) = %v, want %v", i, step.at, step.key, got, step.want)
		}
	}
	if got := b.TokensAt(t0.Add(time.Hour+50*time.Millisecond), "a"); got != 0.5 {
		t.Errorf("TokensAt = %v, want 0.5", got)
	}
	if got := b.TokensAt(t0, "never seen"); got != 2 {
		t.Errorf("TokensAt(new key) = %v, want the burst, 2", got)
	}
	if b.Stats().Keys != 2 {
		t.Errorf("TokensAt stored a key: %d live, want 2", b.Stats().Keys)
	}
}

// A key whose bucket refilled is evicted when room is needed (after
// IdleTimeout), and only such a key: eviction never gives a key back tokens
// it had not earned.
func TestBucketsEvictOnlyFullBuckets(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: 2, IdleTimeout: time.Second})
	b.AllowAt(t0, "a")                              // full again at 1s, evictable at 2s
	b.AllowAt(at(1500*time.Millisecond), "b")       // its next token at 2.5s
	if !b.AllowAt(at(1900*time.Millisecond), "c") { // the overflow bucket's one token
		t.Fatal("first overflowed key rejected by a full overflow bucket")
	}
	if b.AllowAt(at(1900*time.Millisecond), "d") {
		t.Fatal("second overflowed key admitted: the overflow bucket is shared")
	}
	if st := b.Stats(); st.Overflowed != 2 || st.Evicted != 0 {
		t.Fatalf("stats = %+v, want 2 overflowed, none evicted", st)
	}
	if !b.AllowAt(at(2*time.Second), "e") {
		t.Fatal("e was not given a's slot")
	}
	if b.AllowAt(at(2*time.Second), "b") {
		t.Fatal("b was admitted before its token came: it was evicted while not full")
	}
	if st := b.Stats(); st.Keys != 2 || st.Evicted != 1 {
		t.Fatalf("stats = %+v, want 2 keys, 1 evicted", st)
	}
}

// A million distinct keys (100,000, ten times the cap, with -short or
// -race) at one instant get MaxKeys fresh buckets and the overflow bucket's
// burst, nothing more: rotating keys buys an attacker nothing once the cap
// is reached, and memory stays bounded.
func TestBucketsFloodIsBounded(t *testing.T) {
	flood := 1_000_000
	if testing.Short() || raceOn {
		flood = 100_000
	}
	const maxKeys = 10_000
	before := heapAfterGC()
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 3}, MaxKeys: maxKeys})
	now := time.Unix(1_000_000, 0)
	admitted := 0
	buf := make([]byte, 0, 32)
	for i := range flood {
		buf = strconv.AppendInt(append(buf[:0], "attacker-"...), int64(i), 10)
		if b.AllowAt(now, string(buf)) {
			admitted++
		}
	}
	if want := maxKeys + 3; admitted != want {
		t.Errorf("admitted %d of %d distinct keys, want MaxKeys + overflow burst = %d", admitted, flood, want)
	}
	st := b.Stats()
	if st.Keys != maxKeys || st.Overflowed != uint64(flood-maxKeys) {
		t.Errorf("stats = %+v", st)
	}
	if grown := heapAfterGC() - before; grown > maxKeys*128 { // ~37 B a key measured
		t.Errorf("heap grew %d B for %d live keys", grown, maxKeys)
	}
	// Once their buckets refill, the flood's keys make room at no loss.
	if !b.AllowAt(now.Add(3*time.Second+time.Minute), "legit") || b.Stats().Evicted == 0 {
		t.Error("no room made once the flood's buckets refilled")
	}
}

func TestBucketsCancelRefunds(t *testing.T) {
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1e-3, Burst: 1}})
	p, err := b.TryAcquire("a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire("a")
	if !errors.Is(err, sluice.ErrRate) {
		t.Fatalf("second TryAcquire err = %v, want ErrRate", err)
	}
	if ra, _ := sluice.RetryAfter(err); ra < 999*time.Second || ra > 1000*time.Second {
		t.Errorf("RetryAfter = %v, want ~1000s", ra)
	}
	p.Cancel()
	p.Cancel() // once only
	if p, err = b.TryAcquire("a"); err != nil {
		t.Fatalf("after Cancel: %v", err)
	}
	if _, err := b.TryAcquire("a"); err == nil {
		t.Fatal("a double Cancel gave back two tokens")
	}
	p.Release(sluice.Success, time.Millisecond) // a release is not a refund
	if _, err := b.TryAcquire("a"); err == nil {
		t.Fatal("Release(Success) gave the token back")
	}
}

// A permit cancelled after its key was evicted and its slot reused by
// another key gives nothing to that other key.
func TestBucketsRefundAfterEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: 1, IdleTimeout: time.Second})
		p, err := b.TryAcquire("a")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // a's bucket has been full for IdleTimeout
		if _, err := b.TryAcquire("b"); err != nil {
			t.Fatal(err)
		}
		if st := b.Stats(); st.Evicted != 1 {
			t.Fatalf("stats = %+v, want a evicted", st)
		}
		p.Cancel()
		if _, err := b.TryAcquire("b"); err == nil {
			t.Fatal("a's refund went to b")
		}
	})
}

func TestBucketsAcquireWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 10, Burst: 1, MaxWait: 250 * time.Millisecond}})
		ctx := context.Background()
		if _, err := b.Acquire(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := b.Acquire(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("second Acquire waited %v, want 100ms", d)
		}
		// Tokens at +100ms, +200ms are taken by two waiters; the third
		// would wait 300ms > MaxWait: rejected at once.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := b.Acquire(ctx, "a"); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		if q := b.Stats().Queued; q != 2 {
			t.Fatalf("Queued = %d, want 2", q)
		}
		_, err := b.Acquire(ctx, "a")
		if !errors.Is(err, sluice.ErrQueueTimeout) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("err = %v after %v, want ErrQueueTimeout at once", err, time.Since(start))
		}
		if ra, _ := sluice.RetryAfter(err); ra != 300*time.Millisecond {
			t.Errorf("RetryAfter = %v, want 300ms", ra)
		}
		wg.Wait()

		// A deadline the token cannot meet fails at once, taking nothing.
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(dctx, "a"); !errors.Is(err, sluice.ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrDeadline", err)
		}

		// Cancelling a waiter gives its token back.
		cctx, cancelWait := context.WithCancel(ctx)
		done := make(chan error)
		go func() { _, err := b.Acquire(cctx, "b"); done <- err }()
		go func() { _, err := b.Acquire(cctx, "b"); done <- err }()
		synctest.Wait()
		before := b.Tokens("b")
		cancelWait()
		errs := []error{<-done, <-done}
		if errs[0] != nil || !errors.Is(errs[1], context.Canceled) {
			t.Fatalf("errs = %v, want one admitted, one cancelled", errs)
		}
		if after := b.Tokens("b"); after != before+1 {
			t.Errorf("tokens %v -> %v: the cancelled waiter's token was not given back", before, after)
		}
		if _, err := b.Acquire(cctx, "b"); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a done ctx: %v", err)
		}
	})
}

func TestBucketsAllowDoesNotAllocate(t *testing.T) {
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1e9, Burst: 1}})
	b.Allow("10.0.0.1")
	if n := testing.AllocsPerRun(1000, func() { b.Allow("10.0.0.1") }); n != 0 {
		t.Errorf("Allow allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := b.TryAcquire("10.0.0.1")
		p.Cancel()
	}); n != 0 {
		t.Errorf("TryAcquire+Cancel allocates %v times", n)
	}
}

// Many goroutines on one key at one instant get exactly the burst: the CAS
// loses no update. Many goroutines over many keys with churn keep the cap.
func TestBucketsConcurrent(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 100}, MaxKeys: 500})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 1000 {
				if b.AllowAt(now, "hot") {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted != 100 {
		t.Fatalf("admitted %d on one key at one instant, want the burst, 100", admitted)
	}
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				at := now.Add(time.Duration(i) * 10 * time.Millisecond)
				p, err := b.For(strconv.Itoa((g*131 + i) % 3000)).TryAcquire()
				if err == nil && i%2 == 0 {
					p.Cancel()
				}
				b.AllowAt(at, strconv.Itoa(i%3000))
				if k := b.Stats().Keys; k > 500 {
					t.Errorf("%d live keys, cap 500", k)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Keys are kept as hashes: a long key still has a bucket of its own, and a
// flood of long keys costs no more memory per key than short ones.
func TestLongKeys(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: 1000})
	long := string(make([]byte, 64<<10))
	if !b.AllowAt(now, long+"a") || b.AllowAt(now, long+"a") {
		t.Fatal("a long key did not get one bucket of its own")
	}
	if !b.AllowAt(now, long+"b") {
		t.Fatal("two long keys sharing a 64 KB prefix share a bucket")
	}
	before := heapAfterGC()
	for i := range 1000 {
		b.AllowAt(now, long+strconv.Itoa(i))
	}
	if grown := heapAfterGC() - before; grown > 1000*256 {
		t.Fatalf("1000 keys of 64 KB grew the heap by %d B", grown)
	}
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 10})
	g := mustGet(t, m, long+"x")
	if g.key != long+"x" || mustGet(t, m, long+"x") != g || mustGet(t, m, long+"y") == g {
		t.Fatal("Map: long keys do not each map to one limiter made for the full key")
	}
}

// During a flood of keys, a key that did not fit under MaxKeys is answered
// by the overflow bucket, so Tokens and Remaining (the RateLimit header)
// report the overflow bucket's tokens for it, not a full bucket.
func TestBucketsTokensOfOverflowedKey(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := mustBuckets(t, keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 3}, MaxKeys: 2})
	b.AllowAt(t0, "a")
	b.AllowAt(t0, "b") // the table is full: neither key is idle
	for range 3 {
		if !b.AllowAt(t0, "flood") {
			t.Fatal("an overflowed key was refused a token the overflow bucket had")
		}
	}
	if b.AllowAt(t0, "flood") {
		t.Fatal("the drained overflow bucket admitted")
	}
	if got := b.TokensAt(t0, "flood"); got != 0 {
		t.Errorf("TokensAt(overflowed key) = %v, want the overflow bucket's 0", got)
	}
	if n, reset := b.RemainingAt(t0, "flood"); n != 0 || reset != 3*time.Second {
		t.Errorf("RemainingAt(overflowed key) = %d, %v; want 0, 3s", n, reset)
	}
	if got := b.TokensAt(t0, "a"); got != 2 {
		t.Errorf("TokensAt(stored key) = %v, want its own 2", got)
	}
	if n, reset := b.RemainingAt(t0, "a"); n != 2 || reset != time.Second {
		t.Errorf("RemainingAt(stored key) = %d, %v; want 2, 1s", n, reset)
	}
	if st := b.Stats(); st.Keys != 2 {
		t.Errorf("Tokens stored a key: %d live", st.Keys)
	}
}
