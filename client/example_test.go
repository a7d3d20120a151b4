package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// Seed 002's ingestion job: many calls to a service that falls over when
// they all arrive at once. The Executor keeps three in flight, starting the
// next the moment one finishes.
func ExampleExecutor() {
	ex, err := client.NewExecutor(3)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	results := make([]int, 10)
	for i := range results {
		// Go blocks while three tasks run, so the loop itself is the queue.
		if err := ex.Go(ctx, func(context.Context) error {
			if i == 7 {
				return fmt.Errorf("item %d: upstream said no", i)
			}
			results[i] = i * i
			return nil
		}); err != nil {
			break // ctx ended: the remaining items were never started
		}
	}
	err = ex.Wait()
	fmt.Println(results)
	fmt.Println("errors:", err)
	fmt.Println("started:", ex.Stats().Started)
	// Output:
	// [0 1 4 9 16 25 36 0 64 81]
	// errors: item 7: upstream said no
	// started: 10
}

// A backend that rejects everything: after a few failures the throttler
// rejects most requests locally, without sending them.
func ExampleThrottler() {
	th, err := client.NewThrottler(client.ThrottlerConfig{
		Random: func() float64 { return 0.5 }, // a fixed draw, for a reproducible example
	})
	if err != nil {
		panic(err)
	}
	now := time.Now()
	for i := range 5 {
		fmt.Printf("request %d: P=%.2f, ", i, th.RejectProbabilityAt(now))
		p, err := th.TryAcquireAt(now)
		if errors.Is(err, sluice.ErrThrottled) {
			fmt.Println("throttled locally")
			continue
		}
		fmt.Println("sent")
		p.Release(sluice.Dropped, 0) // the backend answered 503
	}
	fmt.Println("rejected locally:", th.Stats().Rejected[sluice.ReasonThrottled])
	// Output:
	// request 0: P=0.00, sent
	// request 1: P=0.50, sent
	// request 2: P=0.67, throttled locally
	// request 3: P=0.75, throttled locally
	// request 4: P=0.80, throttled locally
	// rejected locally: 3
}

func ExampleRejectProbability() {
	// Two minutes of 1000 requests of which the backend accepted 300, at K = 2.
	fmt.Printf("%.3f\n", client.RejectProbability(1000, 300, 2, 1))
	// A healthy backend: no local rejection.
	fmt.Printf("%.3f\n", client.RejectProbability(1000, 990, 2, 1))
	// Output:
	// 0.400
	// 0.000
}

func ExampleRetrier_Do() {
	r, err := client.NewRetrier(client.RetryPolicy{
		BaseDelay: time.Millisecond,
		MaxDelay:  10 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	calls := 0
	err = r.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println(err, calls, r.Stats().Retries)
	// Output: <nil> 3 2
}

func ExamplePermanent() {
	r, _ := client.NewRetrier(client.RetryPolicy{})
	calls := 0
	err := r.Do(context.Background(), func(context.Context) error {
		calls++
		return client.Permanent(errors.New("400 bad request"))
	})
	fmt.Println(err, calls)
	// Output: 400 bad request 1
}

// NextAt is the retry decision without the waiting, for simulations.
func ExampleRetrier_NextAt() {
	r, _ := client.NewRetrier(client.RetryPolicy{Random: func() float64 { return 0.5 }})
	now := time.Now()
	r.BeginAt(now)
	fmt.Println(r.NextAt(now, 1, 0, time.Time{}))                         // first retry: half of 100ms
	fmt.Println(r.NextAt(now, 2, 2*time.Second, time.Time{}))             // the server asked for 2s: then half of 200ms
	fmt.Println(r.NextAt(now, 1, time.Minute, time.Time{}))               // longer than MaxDelay
	fmt.Println(r.NextAt(now, 1, time.Second, now.Add(time.Millisecond))) // past the deadline
	fmt.Println(r.NextAt(now, 3, 0, time.Time{}))                         // three attempts made
	// Output:
	// 50ms retry
	// 2.1s retry
	// 0s hint_too_long
	// 0s past_deadline
	// 0s no_attempts_left
}

func ExampleRetryBudget() {
	b, _ := client.NewRetryBudget(client.RetryBudgetConfig{MinPerSecond: -1})
	now := time.Now()
	for range 20 {
		b.RequestAt(now)
	}
	allowed := 0
	for range 5 {
		if b.TryRetryAt(now) {
			allowed++
		}
	}
	fmt.Println("retries allowed for 20 requests:", allowed)
	// Output: retries allowed for 20 requests: 2
}

func ExampleBackoff() {
	for retry := 1; retry <= 4; retry++ {
		// The top of the jitter range (u close to 1) doubles per retry.
		d, _ := client.Backoff(100*time.Millisecond, time.Second, retry, 0, 0.999)
		fmt.Println(d.Round(time.Millisecond))
	}
	_, ok := client.Backoff(100*time.Millisecond, time.Second, 1, time.Hour, 0.5)
	fmt.Println("wait an hour?", ok)
	// Output:
	// 100ms
	// 200ms
	// 400ms
	// 799ms
	// wait an hour? false
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 22 Nov 2026 01:00:30 GMT", "-1", "999999999999999999999"} {
		d, ok := client.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
	// 24h0m0s true
}

// An HTTP client whose requests go through a Throttler and are retried when
// the server answers 503.
func ExampleTransport() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	// A fixed draw keeps the example reproducible: with one 503 in its
	// window the throttler would otherwise turn the retry away half the time.
	th, _ := client.NewThrottler(client.ThrottlerConfig{Random: func() float64 { return 0.99 }})
	tr, err := client.NewTransport(client.TransportConfig{
		Limiter: th,
		Retry:   client.RetryPolicy{BaseDelay: time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	resp, err := c.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Printf("%+v\n", tr.Stats())
	// Output:
	// 200 hello
	// {RetryStats:{Requests:1 Retries:1 BudgetDenied:0} Rejected:0}
}
