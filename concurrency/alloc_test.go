package concurrency

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

func TestFastPathAllocatesNothing(t *testing.T) {
	l := mustNew(t, Config{Limit: 4, MaxQueue: 4})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(sluice.Success, 1)
	}); n != 0 {
		t.Errorf("Acquire+Release: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		p.Cancel()
	}); n != 0 {
		t.Errorf("TryAcquire+Cancel: %v allocs, want 0", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := l.Acquire(cctx)
		p.Release(sluice.Dropped, 1)
	}); n != 0 {
		t.Errorf("Acquire(cancelable ctx)+Release: %v allocs, want 0", n)
	}
}

func TestAdaptiveReleaseAllocatesNothing(t *testing.T) {
	l := mustNew(t, Config{Algorithm: &recorder{next: 2, samples: make([]adaptive.Sample, 0, 2000)}})
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := l.Acquire(context.Background())
		p.Release(sluice.Success, 1)
	}); n != 0 {
		t.Errorf("Acquire+Release with an Algorithm: %v allocs, want 0", n)
	}
}
