package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

// Three requests against a shared bucket of burst 2: the third is over
// quota, with a Retry-After that admits it when waited.
func Example() {
	srv, err := redistest.Start() // in production: your Redis URL
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	store, err := redisstore.Open(srv.URL(), redisstore.Config{Timeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	buckets, err := redisstore.NewBuckets(store, redisstore.RateConfig{Rate: 10, Burst: 2, Failure: redisstore.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	api := buckets.Key("api") // a sluice.Limiter shared by every replica
	var retry time.Duration
	for i := range 3 {
		p, err := api.TryAcquire()
		if err != nil {
			retry, _ = sluice.RetryAfter(err)
			fmt.Println(i, "rejected, over quota:", errors.Is(err, sluice.ErrQuota))
			continue
		}
		fmt.Println(i, "admitted")
		p.Release(sluice.Success, 0)
	}
	time.Sleep(retry) // rounded up: waiting exactly this long is enough
	_, err = api.TryAcquire()
	fmt.Println("after Retry-After:", err)
	_, err = api.Acquire(context.Background()) // reserves the next token and waits for it
	fmt.Println("Acquire waited:", err)
	// Output:
	// 0 admitted
	// 1 admitted
	// 2 rejected, over quota: true
	// after Retry-After: <nil>
	// Acquire waited: <nil>
}

// Two requests in flight at most per tenant, across every replica: the
// third of a tenant is refused while another tenant still gets its own.
func ExampleKeyedConcurrency() {
	srv, err := redistest.Start() // in production: your Redis URL
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	store, err := redisstore.Open(srv.URL(), redisstore.Config{Timeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	tenants, err := redisstore.NewKeyedConcurrency(store, redisstore.ConcurrencyConfig{Key: "tenants", Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer tenants.Close()
	var held []sluice.Permit
	for _, tenant := range []string{"acme", "acme", "acme", "globex"} {
		p, err := tenants.TryAcquire(tenant)
		fmt.Println(tenant, err)
		if err == nil {
			held = append(held, p)
		}
	}
	for _, p := range held {
		p.Release(sluice.Success, 0) // the lease leaves Redis
	}
	// Output:
	// acme <nil>
	// acme <nil>
	// acme sluice: concurrency limit reached
	// globex <nil>
}
