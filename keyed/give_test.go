package keyed

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/rate"
)

// A cancelled permit credits its own key and no other. Here key a's permit
// is outstanding while a is evicted and a rebuild puts another key, whose
// hash shares a's top 32 bits and a's slot, where a was: the refund must
// not reach that key, which has spent its only token.
func TestGiveNeverCreditsAnotherKey(t *testing.T) {
	b, err := NewBuckets(BucketsConfig{Bucket: rate.Config{Rate: 1.0 / 3600, Burst: 1}, MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.t.shards) != 1 {
		t.Fatalf("%d shards, want 1", len(b.t.shards))
	}
	s := &b.t.shards[0]
	p, err := b.TryAcquire("a")
	if err != nil {
		t.Fatal(err)
	}
	ha := b.t.hash("a")
	hb := ha ^ 1<<8 // same top 32 bits, same slot in a small index
	if hb == 0 {
		t.Fatal("hb is 0")
	}

	s.mu.Lock()
	x, u := b.units(s, clock.Nanos())
	i := x.find(ha)
	if i < 0 || uint64(i) != hb&x.mask {
		s.mu.Unlock()
		t.Fatalf("a in slot %d, b's would be %d", i, hb&x.mask)
	}
	x.slots[i].last.Store(retired) // a is evicted
	s.retire()
	b.t.live.Add(-1)
	s.rebuild(len(x.slots), x.base, nil) // drops a's tombstone
	if !b.t.reserve(s, u) {
		s.mu.Unlock()
		t.Fatal("no room for b")
	}
	ne, _, ok := b.p.Take(b.p.Initial(), u, 1, 0) // b spends its one token
	if !ok {
		s.mu.Unlock()
		t.Fatal("b had no token")
	}
	if j := s.add(hb, struct{}{}, ne); j != i {
		s.mu.Unlock()
		t.Fatalf("b in slot %d, want a's old slot %d", j, i)
	}
	s.mu.Unlock()

	p.Cancel() // a's permit: a is gone, nothing to credit
	x = s.load()
	_, u = b.units(s, clock.Nanos())
	if tk := b.p.Tokens(x.slots[x.find(hb)].last.Load(), u); tk >= 1 {
		t.Fatalf("b has %v tokens after a's permit was cancelled: credited a token it spent", tk)
	}
}

// A refund finds its key wherever a rebuild moved it.
func TestGiveAfterRebuild(t *testing.T) {
	b, err := NewBuckets(BucketsConfig{Bucket: rate.Config{Rate: 1.0 / 3600, Burst: 1}, MaxKeys: 100, IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := &b.t.shards[0]
	p, err := b.TryAcquire("a")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	x := s.load()
	s.rebuild(4*len(x.slots), x.base, nil) // a moves to another slot, most likely
	s.mu.Unlock()
	p.Cancel()
	if tk := b.Tokens("a"); tk != 1 {
		t.Fatalf("a has %v tokens after its permit was cancelled, want 1", tk)
	}
}
