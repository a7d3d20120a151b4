package keyed_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// TokensAt reads a key's bucket in virtual time without creating the key.
func ExampleBuckets_TokensAt() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 3}})
	now := time.Unix(1_700_000_000, 0)
	b.AllowAt(now, "alice")
	b.AllowAt(now, "alice")
	fmt.Printf("%.1f %.1f %d\n", b.TokensAt(now, "alice"), b.TokensAt(now.Add(1500*time.Millisecond), "alice"), b.Stats().Keys)
	fmt.Printf("%.0f %d\n", b.TokensAt(now, "bob"), b.Stats().Keys) // a new key is full, and not stored
	// Output:
	// 1.0 2.5 1
	// 3 1
}

// Keys beyond MaxKeys share one overflow bucket (by default with the
// per-key rate and burst); its own statistics show how hard it is pressed.
func ExampleBuckets_Overflow() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 1, Burst: 2}, MaxKeys: 1})
	now := time.Unix(1_700_000_000, 0)
	for _, key := range []string{"alice", "x1", "x2", "x3"} {
		b.AllowAt(now, key)
	}
	s := b.Overflow().Stats()
	fmt.Println(s.Admitted, s.RejectedTotal())
	// Output: 2 1
}

// RemainingAt is what is left of a key's quota for the IETF RateLimit
// field (httplimit.RatePolicy.Remaining takes Remaining as it is): whole
// tokens, and the time until the bucket is full again. A key that did not
// fit under MaxKeys reports the overflow bucket it is answered by.
func ExampleBuckets_RemainingAt() {
	b, _ := keyed.NewBuckets(keyed.BucketsConfig{Bucket: rate.Config{Rate: 2, Burst: 4}, MaxKeys: 1})
	now := time.Unix(1_700_000_000, 0)
	b.AllowAt(now, "alice")
	b.AllowAt(now, "alice")
	b.AllowAt(now, "alice")
	fmt.Println(b.RemainingAt(now, "alice"))
	b.AllowAt(now, "bob") // no room: the overflow bucket answers bob
	fmt.Println(b.RemainingAt(now, "bob"))
	// Output:
	// 1 1.5s
	// 3 500ms
}
