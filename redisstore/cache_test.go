package redisstore

import (
	"strconv"
	"testing"
	"time"
)

// fullOverLimit returns a cache of max live keys, as after a flood of
// distinct over-limit keys.
func fullOverLimit(max int) *overLimit {
	c := newOverLimit(max)
	for i := range max {
		c.put("k"+strconv.Itoa(i), 1e18, 0)
	}
	return c
}

// A full cache keeps its cap, takes the new key, and keeps the live entries
// it does not need to evict; expired entries go first.
func TestOverLimitFull(t *testing.T) {
	c := fullOverLimit(100)
	c.put("new", 1e18, 0)
	if len(c.m) != 100 || c.until("new", 0) == 0 {
		t.Fatalf("%d entries, new cached until %d", len(c.m), c.until("new", 0))
	}
	// All expired at now=2e18: an insert drops the sampled ones.
	c.put("newer", 3e18, 2e18)
	if n := len(c.m); n > 100-evictSample+1 {
		t.Fatalf("%d entries after an insert among expired ones, want at most %d", n, 100-evictSample+1)
	}
	r := newReservoirs(10)
	for i := range 10 {
		r.add("k"+strconv.Itoa(i), 5, 10, 100, 0)
	}
	if r.add("live", 5, 10, 100, 50) {
		t.Fatal("a full map of live reservoirs took a new key")
	}
	if !r.add("later", 5, 10, 300, 200) || len(r.m) > 10 {
		t.Fatalf("expired reservoirs not dropped: %d", len(r.m))
	}
}

// Batched tokens are spent locally for at most the hold after Redis
// granted them (RateConfig.Batch): tokens added to a live reservoir, given
// back or topped up, do not push its expiry later. (Each addition used to
// move it to its own expiry: a token given back at 900 ms of a 1 s hold
// was still spent at 1.3 s.)
func TestReservoirKeepsTheEarlierExpiry(t *testing.T) {
	r := newReservoirs(10)
	r.add("k", 9, 10, 1000, 0) // a batch granted at 0, held until 1000
	exp := r.take("k", 1, 900)
	if exp != 1000 {
		t.Fatalf("take at 900 = expiry %d, want 1000", exp)
	}
	r.add("k", 1, 10, exp, 900)  // the permit cancelled: given back as it was
	r.add("k", 5, 10, 1900, 950) // a top-up granted at 950
	if got := r.take("k", 1, 1300); got != 0 {
		t.Fatalf("at 1300, past the first batch's hold, a local token was spent (expiry %d)", got)
	}
	r.add("k", 3, 10, 2500, 1500) // a reservoir expired: a new one, with its own expiry
	if got := r.take("k", 1, 2000); got != 2500 {
		t.Fatalf("take at 2000 from a reservoir made at 1500 = expiry %d, want 2500", got)
	}
}

// insertCost is the least time over 5 runs of 200 inserts of new keys
// into a full cache of max keys.
func insertCost(max int) time.Duration {
	best := time.Duration(1 << 62)
	for range 5 {
		c := fullOverLimit(max)
		t0 := time.Now()
		for i := range 200 {
			c.put("new"+strconv.Itoa(i), 1e18, 0)
		}
		best = min(best, time.Since(t0))
	}
	return best
}

// An insert into a full cache costs the same at 100 keys as at 20,000:
// it looks at a few entries, not the whole map. Before the bound, each
// insert scanned the map: 200 times the gap in size, here a factor of
// hundreds. 10x leaves room for a loaded machine and cache effects.
func TestOverLimitInsertCostBounded(t *testing.T) {
	small, large := insertCost(100), insertCost(20000)
	t.Logf("200 inserts into a full cache: %v at 100 keys, %v at 20000", small, large)
	if large > 10*small+time.Millisecond {
		t.Fatalf("inserts at 20000 keys took %v, at 100 keys %v: the cost grows with the cap", large, small)
	}
}

// The cost of an insert of a new key into a full cache, by cap:
//
//	cd redisstore && go test -run - -bench OverLimitPutFull -benchtime 20000x .
func BenchmarkOverLimitPutFull(b *testing.B) {
	for _, max := range []int{1000, 10000, 100000} {
		b.Run("max="+strconv.Itoa(max), func(b *testing.B) {
			c := fullOverLimit(max)
			keys := make([]string, b.N) // each insert a new key
			for i := range keys {
				keys[i] = "new" + strconv.Itoa(i)
			}
			b.ResetTimer()
			for _, k := range keys {
				c.put(k, 1e18, 0)
			}
		})
	}
}
