// Package counter holds the admitted and rejected-by-reason counters every
// limiter keeps for sluice.Stats. Counting takes no lock and never
// allocates after the first contended count; reading sums the counters. (A
// limiter's Stats may still take its own lock to read the rest of its state
// consistently: a rate.Bucket's does.)
//
// # Why the counters spread out under contention
//
// A counter that every core adds to is one cache line that every count
// moves from core to core: on a 2-core Xeon VM a contended add costs about
// 50 ns where an uncontended one costs 5, and a limiter that rejects
// without writing anything else (a read-only decision) would spend most of
// its time there. So Counters works as Java's LongAdder does: one set of
// counters updated with a compare-and-swap while that never fails, and on
// the first failure (two cores counting at once) a set of stripes, each on
// its own pair of cache lines, chosen by the counting goroutine's stack
// address. A goroutine then keeps writing the same stripe, and different
// goroutines (mostly) different stripes, so concurrent counts stop sharing
// a line. Each count lands in exactly one place, so the sum is exact.
package counter

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// slots is one set of counters: admitted, then rejections by reason.
type slots [1 + sluice.NumReasons]atomic.Uint64

// stripe is one set of counters padded to 128 bytes: Intel's adjacent-line
// prefetcher moves lines in pairs, so 64 bytes apart is not far enough.
type stripe struct {
	slots
	_ [128 - unsafe.Sizeof(slots{})%128]byte
}

// maxStripes caps the stripes at 32 KiB: 8 a core up to 32 cores (at
// least 16, 2 KiB), 4 a core at 64.
const maxStripes = 256

// Counters counts admissions and rejections. The zero value is ready to use.
type Counters struct {
	base    slots
	stripes atomic.Pointer[[]stripe]
}

// Admit counts one admission.
func (c *Counters) Admit() { c.add(0) }

// Reject counts one rejection for r.
func (c *Counters) Reject(r sluice.Reason) {
	if int(r) < sluice.NumReasons {
		c.add(1 + int(r))
	}
}

func (c *Counters) add(i int) {
	if s := c.stripes.Load(); s != nil {
		(*s)[Probe()&uintptr(len(*s)-1)].slots[i].Add(1)
		return
	}
	if v := c.base[i].Load(); c.base[i].CompareAndSwap(v, v+1) {
		return
	}
	// Another core counted at the same time: spread out from now on.
	c.base[i].Add(1)
	c.spread()
}

// spread allocates the stripes, once.
func (c *Counters) spread() {
	// Goroutines pick stripes at random, in effect: with 8 stripes a core,
	// two cores counting at once share one with odds of 1 in 16 or less.
	s := make([]stripe, Stripes(8, 16))
	c.stripes.CompareAndSwap(nil, &s)
}

// Stripes is how many stripes to make: perCore a core (so that goroutines
// on different cores rarely share one), a power of two from lo to 256.
func Stripes(perCore, lo int) int {
	n, want := lo, perCore*runtime.GOMAXPROCS(0) // one call: it takes a global lock
	for n < want && n < maxStripes {
		n *= 2
	}
	return n
}

// Probe returns a hash of the calling goroutine's stack address: stable for
// a goroutine (unless its stack moves, which costs only locality) and
// different for goroutines whose stacks differ, as concurrent ones' do. Its
// low bits pick a stripe.
func Probe() uintptr {
	var x byte
	a := uintptr(unsafe.Pointer(&x)) >> 11 // stacks are at least 2 KiB apart
	return (a * 0x9E3779B97F4A7C15) >> 40
}

// Fill copies the counters into s.
func (c *Counters) Fill(s *sluice.Stats) {
	var sum [len(slots{})]uint64
	for i := range c.base {
		sum[i] = c.base[i].Load()
	}
	if p := c.stripes.Load(); p != nil {
		for j := range *p {
			for i := range (*p)[j].slots {
				sum[i] += (*p)[j].slots[i].Load()
			}
		}
	}
	s.Admitted = sum[0]
	copy(s.Rejected[:], sum[1:])
}
