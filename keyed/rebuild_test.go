package keyed

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/rate"
)

// Admissions on a live key take no lock, so they race with the rebuilds of
// its shard's index (growth, tombstones dropped, shrinking). A rebuild
// retires every old word as it copies it, so an admission either lands
// before the copy or fails and is made again: the key's tokens account
// exactly for its admissions, however many rebuilds ran meanwhile.
func TestRebuildLosesNoUpdate(t *testing.T) {
	const burst = 1 << 40 // rate 0: the words count tokens, nothing refills
	b, err := NewBuckets(BucketsConfig{Bucket: rate.Config{Rate: 0, Burst: burst}, MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.t.shards) != 1 {
		t.Fatalf("%d shards, want 1: the churn must rebuild the hot key's shard", len(b.t.shards))
	}
	s := &b.t.shards[0]
	hot := []string{"hot0", "hot1", "hot2", "hot3"}
	for _, k := range hot {
		b.Allow(k) // taken from: never full, never evicted
	}
	var admitted [4]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if b.Allow(hot[g]) {
					admitted[g].Add(1)
				}
				if _, err := b.TryAcquire(hot[(g+1)%4]); err == nil {
					admitted[(g+1)%4].Add(1)
				}
			}
		})
	}
	rebuilds := 0
	for i := range 100_000 {
		x := s.load()
		// A churn key taken and given back is full again: evictable,
		// so new keys evict it, leave tombstones, and force rebuilds.
		if p, err := b.TryAcquire("churn" + strconv.Itoa(i)); err == nil {
			p.Cancel()
		}
		if s.load() != x {
			rebuilds++
		}
	}
	stop.Store(true)
	wg.Wait()
	if rebuilds < 100 {
		t.Fatalf("only %d rebuilds", rebuilds)
	}
	for g, k := range hot {
		taken := burst - 1 - int64(b.Tokens(k))
		if got := admitted[g].Load(); got != taken {
			t.Errorf("%s: %d admitted, %d tokens taken: an update was lost", k, got, taken)
		}
	}
	t.Logf("%d rebuilds", rebuilds)
}
