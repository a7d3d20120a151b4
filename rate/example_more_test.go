package rate_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rate"
)

// Weighted requests take n tokens at once; a request larger than the burst
// can never be admitted.
func ExampleBucket_AllowN() {
	b, _ := rate.NewBucket(rate.Config{Rate: 100, Burst: 10})
	fmt.Println(b.AllowN(7), b.AllowN(7), b.AllowN(3), b.AllowN(11))
	// Output: true false true false
}

// Reserve takes tokens now for work that may start later: Delay says how
// long to wait, Cancel gives the tokens back if the work never happens.
func ExampleBucket_Reserve() {
	b, _ := rate.NewBucket(rate.Config{Rate: 10, Burst: 1})
	first, _ := b.Reserve(1, time.Second)
	second, ok := b.Reserve(1, time.Second)
	fmt.Println(first.Delay() == 0, ok, second.Delay() > 50*time.Millisecond)
	second.Cancel() // the second call was not needed after all
	_, ok = b.Reserve(1, 0)
	fmt.Println(ok) // the first reservation still holds the only token
	// Output:
	// true true true
	// false
}

// Tokens reports what the bucket holds now; it starts full.
func ExampleBucket_Tokens() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 3})
	b.AllowN(2)
	fmt.Printf("%.0f\n", b.Tokens())
	// Output: 1
}

// Limits change at run time under concurrent use; Config reads them back.
func ExampleBucket_SetBurst() {
	b, _ := rate.NewBucket(rate.Config{Rate: 5, Burst: 1})
	_ = b.SetRate(50)
	_ = b.SetBurst(10)
	_ = b.SetMaxWait(20 * time.Millisecond)
	fmt.Println(b.SetBurst(-1) != nil) // invalid: the bucket is unchanged
	fmt.Printf("%+v\n", b.Config())
	// Output:
	// true
	// {Rate:50 Burst:10 MaxWait:20ms}
}

// SetLimits changes the rate and the burst in one step, checked as a pair:
// here a deep bucket becomes a slow, shallow one, where SetRate first is
// refused (at the old burst, 1e6, a rate of 1e-6 takes 3e4 years to fill).
func ExampleBucket_SetLimits() {
	b, _ := rate.NewBucket(rate.Config{Rate: 1, Burst: 1_000_000})
	fmt.Println(b.SetRate(0.000001) != nil) // checked against the burst as it stands
	fmt.Println(b.SetLimits(0.000001, 1))
	fmt.Println(b.SetLimits(-1, 5) != nil) // invalid: the bucket is unchanged
	fmt.Printf("%+v %.0f\n", b.Config(), b.Tokens())
	// Output:
	// true
	// <nil>
	// true
	// {Rate:1e-06 Burst:1 MaxWait:0s} 1
}

// RemainingAt is what is left of the quota for the IETF RateLimit field
// (httplimit.BucketRemaining reports Remaining): whole tokens, and the
// time until the bucket is full again; -1 if it never refills.
func ExampleBucket_RemainingAt() {
	b, _ := rate.NewBucket(rate.Config{Rate: 2, Burst: 3})
	now := time.Unix(1_700_000_000, 0)
	b.AllowAt(now, 3)
	fmt.Println(b.RemainingAt(now.Add(750 * time.Millisecond))) // 1.5 tokens back
	fmt.Println(b.RemainingAt(now.Add(2 * time.Second)))

	never, _ := rate.NewBucket(rate.Config{Rate: 0, Burst: 3})
	never.AllowAt(now, 1)
	fmt.Println(never.RemainingAt(now))
	// Output:
	// 1 750ms
	// 3 0s
	// 2 -1ns
}
