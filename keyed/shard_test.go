package keyed

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The open-addressing table stays consistent through random insertions and
// sweeps, across growth, shrinking and rebuilds: every live key is found in
// its slot, the counts of live keys and tombstones are right, the load stays
// within bounds, and the sweep evicts only idle keys.
func TestShardConsistency(t *testing.T) {
	var tb table[struct{}]
	tb.init(4096, 10, nil, 0)
	s := &tb.shards[0]
	rng := rand.New(rand.NewPCG(3, 4))
	now := int64(0)
	rebuilds := 0
	for step := range 30_000 {
		now += int64(rng.IntN(3))
		phase := step / 5000 % 2 // alternate filling and draining phases
		before := s.load()
		switch {
		case rng.IntN(4) > phase*3:
			h := tb.hash(strconv.Itoa(rng.IntN(2000)))
			if s.load().find(h) < 0 {
				if i := s.add(h, struct{}{}, now); s.load().find(h) != i {
					t.Fatalf("step %d: added %x at %d, found at %d", step, h, i, s.load().find(h))
				}
			}
		default:
			last := map[uint64]int64{}
			x := s.load()
			for i := range x.slots {
				if e := &x.slots[i]; e.h.Load() != 0 && e.last.Load() != retired {
					last[e.h.Load()] = e.last.Load()
				}
			}
			s.sweep(now, rng.IntN(fullSweepStep), tb.stale, nil)
			for h, l := range last {
				if s.load().find(h) < 0 && now-l < tb.idle {
					t.Fatalf("step %d: %x evicted after %d idle, want >= %d", step, h, now-l, tb.idle)
				}
			}
		}
		x := s.load()
		if x != before {
			rebuilds++
			// Every word of a replaced index is retired: no update made
			// on it can succeed, so none is lost.
			for i := range before.slots {
				if before.slots[i].h.Load() != 0 && before.slots[i].last.Load() != retired {
					t.Fatalf("step %d: slot %d of a replaced index is live", step, i)
				}
			}
		}
		live, dead := 0, 0
		for i := range x.slots {
			e := &x.slots[i]
			switch {
			case e.h.Load() == 0:
				continue
			case e.last.Load() == retired:
				dead++
				continue
			}
			live++
			if j := x.find(e.h.Load()); j != int32(i) {
				t.Fatalf("step %d: %x in slot %d, found at %d", step, e.h.Load(), i, j)
			}
		}
		if live != int(s.n) || dead != int(s.dead) {
			t.Fatalf("step %d: %d keys and %d tombstones in slots, n = %d, dead = %d", step, live, dead, s.n, s.dead)
		}
		if 4*(live+dead) > 3*len(x.slots) || (len(x.slots) > minSlots && 8*live < len(x.slots)) {
			t.Fatalf("step %d: %d keys and %d tombstones in %d slots", step, live, dead, len(x.slots))
		}
	}
	if s.created.Load()-s.evicted.Load() != uint64(s.n) || s.evicted.Load() == 0 || rebuilds == 0 {
		t.Fatalf("created %d - evicted %d != %d live, or no rebuild (%d)", s.created.Load(), s.evicted.Load(), s.n, rebuilds)
	}
}

// An insertion into a full table looks at a bounded number of keys, however
// many are live: no request pays for a sweep of the whole map.
func TestReserveWorkIsBounded(t *testing.T) {
	looked := 0
	var tb table[struct{}]
	tb.init(100_000, 1, func(struct{}) bool { looked++; return true }, 0) // every key idle but busy
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
	tb.init(100_000, 1<<62, nil, 0) // nothing ever idle
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
