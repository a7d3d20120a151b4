package keyed

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The slot array, the index and the chunks stay consistent through random
// insertions and sweeps, including chunk release and regrowth.
func TestShardConsistency(t *testing.T) {
	var tb table[struct{}]
	tb.init(64, 10, nil) // one shard, chunks of 64
	s := &tb.shards[0]
	s.chunk = 8 // small chunks, to exercise their release and regrowth
	rng := rand.New(rand.NewPCG(3, 4))
	now := int64(0)
	for step := range 20_000 {
		now += int64(rng.IntN(3))
		switch {
		case rng.IntN(3) > 0 && s.n < 64:
			k := strconv.Itoa(rng.IntN(200))
			if _, ok := s.index[k]; !ok {
				s.add(k, struct{}{}, now)
			}
		default:
			last := map[string]int64{}
			for i := range s.n {
				last[s.at(i).key] = s.at(i).last
			}
			s.sweep(now, tb.idle, rng.IntN(fullSweepStep), nil)
			for k, l := range last {
				if _, ok := s.index[k]; !ok && now-l < tb.idle {
					t.Fatalf("step %d: %q evicted after %d idle, want >= %d", step, k, now-l, tb.idle)
				}
			}
		}
		if len(s.index) != int(s.n) {
			t.Fatalf("step %d: index has %d keys, n = %d", step, len(s.index), s.n)
		}
		if need := (int(s.n) + int(s.chunk) - 1) / int(s.chunk); len(s.chunks) < need || len(s.chunks) > need+1 {
			t.Fatalf("step %d: %d chunks for %d slots of %d", step, len(s.chunks), s.n, s.chunk)
		}
		for i := range s.n {
			e := s.at(i)
			if j, ok := s.index[e.key]; !ok || j != i {
				t.Fatalf("step %d: slot %d holds %q, index says %d, %v", step, i, e.key, j, ok)
			}
		}
	}
	if s.created.Load()-s.evicted.Load() != uint64(s.n) {
		t.Fatalf("created %d - evicted %d != %d live", s.created.Load(), s.evicted.Load(), s.n)
	}
}
