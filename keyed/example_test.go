package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// A token bucket per client, 5 requests a second with bursts of 2, for at
// most 100,000 clients.
func ExampleBuckets() {
	perClient, err := keyed.NewBuckets(keyed.BucketsConfig{
		Bucket:  rate.Config{Rate: 5, Burst: 2},
		MaxKeys: 100_000,
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println("203.0.113.7:", perClient.Allow("203.0.113.7"))
	}
	fmt.Println("198.51.100.2:", perClient.Allow("198.51.100.2"))
	st := perClient.Stats()
	fmt.Println("keys:", st.Keys, "admitted:", st.Admitted, "rejected:", st.RejectedTotal())
	// Output:
	// 203.0.113.7: true
	// 203.0.113.7: true
	// 203.0.113.7: false
	// 198.51.100.2: true
	// keys: 2 admitted: 3 rejected: 1
}

func ExampleNewBuckets() {
	_, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 5, Burst: -1}})
	fmt.Println(errors.Is(err, sluice.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// sluice/keyed: BucketsConfig.Bucket.Burst = -1: must be >= 0
}

// Keys beyond MaxKeys share the overflow bucket: rotating keys does not buy
// more than one key's rate, and the keys already live keep theirs.
func ExampleBuckets_overflow() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}, MaxKeys: 2})
	now := time.Unix(1_700_000_000, 0)
	for _, key := range []string{"alice", "bob", "mallory-1", "mallory-2", "mallory-3"} {
		fmt.Println(key, b.AllowAt(now, key))
	}
	fmt.Println("overflowed:", b.Stats().Overflowed)
	// Output:
	// alice true
	// bob true
	// mallory-1 true
	// mallory-2 false
	// mallory-3 false
	// overflowed: 3
}

// TryAcquire returns a permit (Cancel gives the token back) or a rejection
// with a retry-after hint.
func ExampleBuckets_TryAcquire() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 2, Burst: 1}})
	p, _ := b.TryAcquire("k")
	_, err := b.TryAcquire("k")
	ra, _ := sluice.RetryAfter(err)
	fmt.Println(errors.Is(err, sluice.ErrRate), ra.Round(100*time.Millisecond))
	p.Cancel() // the work never ran
	fmt.Println("tokens:", b.Tokens("k") >= 1)
	// Output:
	// true 500ms
	// tokens: true
}

// Acquire waits for the key's next token, within the context's deadline and
// MaxWait, and fails at once if the token would come too late.
func ExampleBuckets_Acquire() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.Acquire(ctx, "k")
	fmt.Println(err)
	_, err = b.Acquire(ctx, "k") // the next token is a second away
	fmt.Println(errors.Is(err, sluice.ErrDeadline))
	// Output:
	// <nil>
	// true
}

// For gives one key's bucket as a sluice.Limiter: here a per-client rate
// limit composed with a global concurrency limit, all-or-nothing.
func ExampleBuckets_For() {
	perClient, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 5}})
	global, _ := concurrency.New(concurrency.Config{Limit: 1})
	held, _ := global.TryAcquire()

	_, err := sluice.All(perClient.For("alice"), global).TryAcquire()
	fmt.Println(err)
	fmt.Println("alice's tokens:", perClient.Tokens("alice") > 4.99) // refunded
	held.Release(sluice.Success, 0)
	// Output:
	// sluice: concurrency limit reached
	// alice's tokens: true
}

// A Map holds any sluice.Limiter per key: here a concurrency limit of 2
// requests in flight per tenant.
func ExampleMap() {
	perTenant, err := keyed.New(keyed.Config[*concurrency.Limiter]{
		New: func(string) (*concurrency.Limiter, error) {
			return concurrency.New(concurrency.Config{Limit: 2})
		},
		MaxKeys:     10_000,
		IdleTimeout: 5 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	a1, _ := perTenant.TryAcquire("acme")
	a2, _ := perTenant.TryAcquire("acme")
	_, err = perTenant.TryAcquire("acme")
	fmt.Println("acme third:", err)
	_, err = perTenant.TryAcquire("globex")
	fmt.Println("globex first:", err)
	a1.Release(sluice.Success, time.Millisecond)
	a2.Release(sluice.Success, time.Millisecond)
	// Output:
	// acme third: sluice: concurrency limit reached
	// globex first: <nil>
}

func ExampleNew() {
	_, err := keyed.New(keyed.Config[*rate.Bucket]{})
	fmt.Println(err)
	// Output: sluice/keyed: Config.New: is required
}

// Get returns the key's own limiter, to call its specific methods.
func ExampleMap_Get() {
	m, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 1, Burst: 3}) },
	})
	b, _ := m.Get("alice")
	fmt.Println(b.AllowN(2), b.Tokens() < 1.01)
	// Output: true true
}

// Acquire waits as the key's limiter does; this one has no queue, so a
// tenant over its limit is rejected at once, and other tenants are not.
func ExampleMap_Acquire() {
	m, _ := keyed.New(keyed.Config[*concurrency.Limiter]{
		New: func(string) (*concurrency.Limiter, error) {
			return concurrency.New(concurrency.Config{Limit: 1})
		},
	})
	ctx := context.Background()
	p, _ := m.Acquire(ctx, "acme")
	_, err := m.Acquire(ctx, "acme")
	fmt.Println("acme:", sluice.ReasonOf(err))
	_, err = m.Acquire(ctx, "globex")
	fmt.Println("globex:", err)
	p.Release(sluice.Success, time.Millisecond)
	// Output:
	// acme: limit
	// globex: <nil>
}

func ExampleMap_For() {
	m, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New: func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 1, Burst: 1}) },
	})
	var l sluice.Limiter = m.For("alice")
	_, err := l.TryAcquire()
	fmt.Println(err, l.Stats().Admitted)
	// Output: <nil> 1
}

func ExampleMap_Stats() {
	m, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New:     func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 1, Burst: 1}) },
		MaxKeys: 2,
	})
	for _, k := range []string{"a", "b", "c", "d"} {
		_, _ = m.TryAcquire(k)
	}
	st := m.Stats()
	fmt.Printf("keys %d/%d, created %d, overflowed %d, admitted %d, rejected %d\n",
		st.Keys, st.MaxKeys, st.Created, st.Overflowed, st.Admitted, st.RejectedTotal())
	// Output: keys 2/2, created 2, overflowed 2, admitted 3, rejected 1
}

// GetAt runs the Map in virtual time, as the simulator does: a key idle for
// IdleTimeout makes room for a new one; a key in use does not.
func ExampleMap_GetAt() {
	m, _ := keyed.New(keyed.Config[*rate.Bucket]{
		New:         func(string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 1, Burst: 1}) },
		MaxKeys:     1,
		IdleTimeout: time.Minute,
	})
	t0 := time.Unix(1_700_000_000, 0)
	alice, _ := m.GetAt(t0, "alice")
	bob, _ := m.GetAt(t0.Add(30*time.Second), "bob")
	fmt.Println("bob overflowed:", bob == m.Overflow())
	bob, _ = m.GetAt(t0.Add(time.Minute), "bob")
	fmt.Println("bob has his own:", bob != m.Overflow() && bob != alice)
	st := m.Stats()
	fmt.Println("evicted:", st.Evicted, "overflowed:", st.Overflowed)
	// Output:
	// bob overflowed: true
	// bob has his own: true
	// evicted: 1 overflowed: 1
}

// AllowAt and TokensAt run in virtual time. Every rate a rate.Bucket takes
// works per key, here eight tokens a nanosecond.
func ExampleBuckets_AllowAt() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 8e9, Burst: 20}})
	now := time.Unix(1_700_000_000, 0)
	admitted := 0
	for range 25 {
		if b.AllowAt(now, "10.0.0.1") {
			admitted++
		}
	}
	fmt.Println(admitted, b.TokensAt(now.Add(time.Nanosecond), "10.0.0.1"))
	// Output: 20 8
}
