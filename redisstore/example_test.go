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
