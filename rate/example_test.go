package rate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rate"
)

// A bucket of 3 at 10 per second admits a burst of 3, then one per 100 ms.
func ExampleNewBucket() {
	b, err := rate.NewBucket(rate.Config{Rate: 10, Burst: 3})
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, 0, 50 * time.Millisecond, 100 * time.Millisecond} {
		fmt.Println(at, b.AllowAt(start.Add(at), 1))
	}
	// Output:
	// 0s true
	// 0s true
	// 0s true
	// 0s false
	// 50ms false
	// 100ms true
}

func ExampleNewBucket_invalid() {
	_, err := rate.NewBucket(rate.Config{Rate: -5, Burst: 1})
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrInvalidConfig))
	// Output:
	// sluice/rate: Config.Rate = -5: must be >= 0 (+Inf for no limit)
	// true
}

func ExampleBucket_Allow() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 2})
	fmt.Println(b.Allow(), b.Allow(), b.Allow())
	// Output: true true false
}

// Wait fails at once, taking nothing, when the token cannot come before the
// context's deadline: the caller learns in microseconds, not after 75 ms.
func ExampleBucket_Wait() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Millisecond)
	defer cancel()

	fmt.Println(b.Wait(ctx)) // the bucket starts full
	start := time.Now()
	err := b.Wait(ctx) // the next token is a second away
	fmt.Println(errors.Is(err, sluice.ErrDeadline), errors.Is(err, context.DeadlineExceeded))
	fmt.Println(time.Since(start) < 75*time.Millisecond)
	// Output:
	// <nil>
	// true true
	// true
}

// ReserveAt takes tokens ahead of time; the caller acts after Delay, or
// cancels to give them back.
func ExampleBucket_ReserveAt() {
	b, _ := rate.NewBucket(rate.Config{Rate: 10, Burst: 1})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	r1, ok := b.ReserveAt(now, 1, time.Second)
	fmt.Println(ok, r1.Delay())
	r2, ok := b.ReserveAt(now, 1, time.Second)
	fmt.Println(ok, r2.Delay())
	_, ok = b.ReserveAt(now, 1, 150*time.Millisecond)
	fmt.Println(ok)

	r2.Cancel() // the work will not run: the token goes back
	fmt.Println(b.TokensAt(now))
	// Output:
	// true 0s
	// true 100ms
	// false
	// 0
}

func ExampleBucket_TryAcquire() {
	b, _ := rate.NewBucket(rate.Config{Rate: 2, Burst: 1})
	p, err := b.TryAcquire()
	fmt.Println(err)
	defer p.Release(sluice.Success, 0)

	_, err = b.TryAcquire()
	after, _ := sluice.RetryAfter(err)
	fmt.Println(errors.Is(err, sluice.ErrRate), after > 400*time.Millisecond)
	// Output:
	// <nil>
	// true true
}

func ExampleBucket_SetRateAt() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 10})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.AllowAt(now, 10)
	_ = b.SetRateAt(now, 100) // the empty bucket now refills at 100/s
	fmt.Println(b.TokensAt(now.Add(50 * time.Millisecond)))
	// Output: 5
}

// A Reader shapes a stream to the bucket's rate in bytes per second. This
// bucket holds the whole message, so nothing waits.
func ExampleNewReader() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1 << 20, Burst: 64 << 10}) // 1 MiB/s
	r := rate.NewReader(strings.NewReader("hello, shaped world\n"), b)
	if _, err := io.Copy(os.Stdout, r); err != nil {
		panic(err)
	}
	// Output: hello, shaped world
}

func ExampleNewWriter() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1 << 20, Burst: 64 << 10})
	w := rate.NewWriter(os.Stdout, b)
	fmt.Fprintln(w, "written at most 1 MiB/s")
	// Output: written at most 1 MiB/s
}

// A writer whose next chunk cannot be paid for before the deadline stops at
// once, reporting what it wrote.
func ExampleNewWriterContext() {
	b, _ := rate.NewBucket(rate.Config{Rate: 10, Burst: 4}) // 10 B/s, chunks of 4
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var sb strings.Builder
	n, err := rate.NewWriterContext(ctx, &sb, b).Write([]byte("0123456789"))
	fmt.Println(n, sb.String(), errors.Is(err, sluice.ErrDeadline))
	// Output: 4 0123 true
}

func ExampleNewReaderContext() {
	b, _ := rate.NewBucket(rate.Config{Rate: 10, Burst: 4})
	ctx, cancel := context.WithCancel(context.Background())
	r := rate.NewReaderContext(ctx, strings.NewReader("0123456789"), b)
	p := make([]byte, 10)
	n, err := r.Read(p)
	fmt.Println(n, string(p[:n]), err)
	cancel()
	n, err = r.Read(p)
	fmt.Println(n, err)
	// Output:
	// 4 0123 <nil>
	// 0 context canceled
}

// With sluice.All, a token the bucket granted goes back when a later
// limiter rejects.
func ExampleBucket_Acquire() {
	perClient, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	closed, _ := rate.NewBucket(rate.Config{}) // the zero Config admits nothing
	_, err := sluice.All(perClient, closed).Acquire(context.Background())
	fmt.Println(sluice.ReasonOf(err), perClient.Tokens() == 1)

	p, err := perClient.Acquire(context.Background())
	fmt.Println(err, perClient.Tokens() < 1)
	p.Release(sluice.Success, 10*time.Millisecond) // a rate token is spent: nothing to give back
	// Output:
	// too_large true
	// <nil> true
}

// Stats counts every admission and rejection, by reason; Limit is the rate.
func ExampleBucket_Stats() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 2})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3 {
		b.AllowAt(now, 1)
	}
	b.AllowAt(now, 5) // more than the burst: never
	st := b.Stats()
	fmt.Println(st.Limit, st.Admitted, st.Rejected[sluice.ReasonRate], st.Rejected[sluice.ReasonTooLarge])
	// Output: 1 2 1 1
}

// Lowering the burst drops the tokens above it; raising it adds room, not
// tokens.
func ExampleBucket_SetBurstAt() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 10})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_ = b.SetBurstAt(now, 3)
	fmt.Println(b.TokensAt(now))
	_ = b.SetBurstAt(now, 20)
	fmt.Println(b.TokensAt(now), b.Config().Burst)
	// Output:
	// 3
	// 3 20
}
