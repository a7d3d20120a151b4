package keyed

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The open-addressing table stays consistent through random insertions and
// sweeps, across growth and shrinking: every key is found in its slot, the
// count is right, the load stays within bounds, and the sweep evicts only
// idle keys.
func TestShardConsistency(t *testing.T) {
	var tb table[struct{}]
	tb.init(4096, 10, nil)
	s := &tb.shards[0]
	rng := rand.New(rand.NewPCG(3, 4))
	now := int64(0)
	for step := range 30_000 {
		now += int64(rng.IntN(3))
		phase := step / 5000 % 2 // alternate filling and draining phases
		switch {
		case rng.IntN(4) > phase*3:
			h := tb.hash(strconv.Itoa(rng.IntN(2000)))
			if s.find(h) < 0 {
				if i := s.add(h, struct{}{}, now); s.find(h) != i {
					t.Fatalf("step %d: added %x at %d, found at %d", step, h, i, s.find(h))
				}
			}
		default:
			last := map[uint64]int64{}
			for i := range s.slots {
				if e := &s.slots[i]; e.h != 0 {
					last[e.h] = e.last
				}
			}
			s.sweep(now, rng.IntN(fullSweepStep), tb.stale, nil)
			for h, l := range last {
				if s.find(h) < 0 && now-l < tb.idle {
					t.Fatalf("step %d: %x evicted after %d idle, want >= %d", step, h, now-l, tb.idle)
				}
			}
		}
		live := 0
		for i := range s.slots {
			e := &s.slots[i]
			if e.h == 0 {
				continue
			}
			live++
			if j := s.find(e.h); j != int32(i) {
				t.Fatalf("step %d: %x in slot %d, found at %d", step, e.h, i, j)
			}
		}
		if live != int(s.n) {
			t.Fatalf("step %d: %d keys in slots, n = %d", step, live, s.n)
		}
		if 4*live > 3*len(s.slots) || (len(s.slots) > minSlots && 8*live < len(s.slots)) {
			t.Fatalf("step %d: %d keys in %d slots", step, live, len(s.slots))
		}
	}
	if s.created.Load()-s.evicted.Load() != uint64(s.n) || s.evicted.Load() == 0 {
		t.Fatalf("created %d - evicted %d != %d live", s.created.Load(), s.evicted.Load(), s.n)
	}
}

// An insertion into a full table looks at a bounded number of keys, however
// many are live: no request pays for a sweep of the whole map.
func TestReserveWorkIsBounded(t *testing.T) {
	looked := 0
	var tb table[struct{}]
	tb.init(100_000, 1, func(struct{}) bool { looked++; return true }) // every key idle but busy
	for i := range 100_000 {
		h := tb.hash(strconv.Itoa(i))
		s := tb.shardOf(h)
		if !tb.reserve(s, 0) {
			t.Fatalf("key %d did not fit", i)
		}
		s.add(h, struct{}{}, 0)
	}
	for i := range 1000 {
		looked = 0
		s := tb.shardOf(tb.hash("new" + strconv.Itoa(i)))
		if tb.reserve(s, 10) {
			t.Fatal("a full table of busy keys made room")
		}
		if looked > sweepStep+fullSweepStep {
			t.Fatalf("one insertion looked at %d keys, want <= %d", looked, sweepStep+fullSweepStep)
		}
	}
	if st := tb.stats(); st.Keys != 100_000 || st.Overflowed != 1000 {
		t.Fatalf("stats = %+v", st)
	}
}

func BenchmarkInsertIntoFullTable(b *testing.B) {
	var tb table[struct{}]
	tb.init(100_000, 1<<62, nil) // nothing ever idle
	for i := range 100_000 {
		h := tb.hash(strconv.Itoa(i))
		s := tb.shardOf(h)
		tb.reserve(s, 0)
		s.add(h, struct{}{}, 0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := tb.shardOf(tb.hash(strconv.Itoa(i)))
		i++
		s.mu.Lock()
		tb.reserve(s, 0)
		s.mu.Unlock()
	}
}
