package counter

import (
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
)

// Counts made by many goroutines at once, before and after the counters
// spread into stripes, all arrive: the sum is exact.
func TestCountersExactUnderContention(t *testing.T) {
	var c Counters
	const goroutines, each = 8, 20000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if (g+i)%3 == 0 {
					c.Admit()
				} else {
					c.Reject(sluice.Reason(1 + (g+i)%(sluice.NumReasons-1)))
				}
			}
		})
	}
	wg.Wait()
	var want sluice.Stats
	for g := range goroutines {
		for i := range each {
			if (g+i)%3 == 0 {
				want.Admitted++
			} else {
				want.Rejected[1+(g+i)%(sluice.NumReasons-1)]++
			}
		}
	}
	var got sluice.Stats
	c.Fill(&got)
	if got != want {
		t.Errorf("Fill = %+v\nwant %+v", got, want)
	}
}

// A forced spread keeps what was counted before it and counts into the
// stripes after it; a reason out of range is ignored.
func TestCountersSpread(t *testing.T) {
	var c Counters
	c.Admit()
	c.Reject(sluice.ReasonRate)
	c.spread()
	if c.stripes.Load() == nil {
		t.Fatal("no stripes after spread")
	}
	c.Admit()
	c.Reject(sluice.ReasonRate)
	c.Reject(sluice.NumReasons)
	var s sluice.Stats
	c.Fill(&s)
	if s.Admitted != 2 || s.Rejected[sluice.ReasonRate] != 2 || s.RejectedTotal() != 2 {
		t.Errorf("Fill = %+v, want 2 admitted, 2 rejected for rate", s)
	}
	if n := len(*c.stripes.Load()); n&(n-1) != 0 || n > maxStripes {
		t.Errorf("%d stripes, want a power of two up to %d", n, maxStripes)
	}
}

func TestCountersAllocFree(t *testing.T) {
	var c Counters
	c.spread()
	if n := testing.AllocsPerRun(100, func() { c.Admit(); c.Reject(sluice.ReasonLimit) }); n != 0 {
		t.Errorf("%v allocs per count, want 0", n)
	}
}

func BenchmarkCountersParallel(b *testing.B) {
	var c Counters
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Reject(sluice.ReasonRate)
		}
	})
}
