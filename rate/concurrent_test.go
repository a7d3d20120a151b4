package rate

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines take tokens at a shared virtual clock while (in half the
// cases) a setter changes the rate and the burst. Over the whole virtual
// interval the tokens kept (taken minus cancelled) stay within the integral
// of the rate plus the burst, the bucket never holds more than its burst,
// and Stats counts every admission. Run with -race: this is the test of the
// lock-free path, of the retire-and-swap in the setters and of the rebase.
func TestConcurrentBound(t *testing.T) {
	const (
		workers = 8
		ops     = 5000
	)
	cases := []struct {
		name  string
		rate  float64 // per virtual second
		burst int
		unit  int   // n is 1, 2 or 3 times unit
		step  int64 // virtual ns per op
	}{
		// Demand (2 tokens an op) is 8 times the supply (1/4 token an op).
		{"rate=1000", 1000, 20, 1, int64(time.Second / 1000 / 4)},
		// 1e12/s has units of 2^-26 ns, so the base moves every ~34 s:
		// 400 virtual seconds cross a dozen rebases.
		{"rate=1e12", 1e12, 4e10, 1e10, int64(10 * time.Millisecond)},
	}
	for _, c := range cases {
		for _, withSetters := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/setters=%v", c.name, withSetters), func(t *testing.T) {
				concurrentRun(t, c.rate, c.burst, c.unit, c.step, workers, ops, withSetters)
			})
		}
	}
}

func concurrentRun(t *testing.T, rate float64, burst, unit int, step int64, workers, ops int, withSetters bool) {
	b := mustBucket(t, Config{Rate: rate, Burst: burst})
	base0 := b.st.Load().base
	var (
		vclock  atomic.Int64  // virtual ns since t0
		kept    atomic.Int64  // tokens taken and not given back
		oks     atomic.Uint64 // calls that were admitted, to check Stats
		lastAct atomic.Int64  // latest time a reservation may act
		// The setter takes the write side so that its time is never
		// earlier than a time an op already used (see SetRateAt); ops
		// share the read side and race each other freely.
		order sync.RWMutex
		wg    sync.WaitGroup
		// rates[i] holds from ats[i] on; the bound integrates them.
		ats   = []int64{0}
		rates = []float64{rate}
	)
	maxWait := time.Duration(step) * 20
	// set changes the config; worker 0 calls it 10 times in a run, so that
	// the slack for pending reservations (below) stays small.
	set := func(i int) {
		order.Lock()
		defer order.Unlock()
		now := vclock.Load()
		at := t0.Add(time.Duration(now))
		r := []float64{rate / 2, rate / 10, rate}[i%3]
		if err := b.SetRateAt(at, r); err != nil {
			t.Error(err)
		}
		if err := b.SetBurstAt(at, []int{burst, burst / 2, unit * 3}[i%3]); err != nil {
			t.Error(err)
		}
		ats, rates = append(ats, now), append(rates, r)
	}
	for w := range workers {
		wg.Go(func() {
			for i := range ops {
				if withSetters && w == 0 && i%(ops/10) == ops/20 {
					set(i / (ops / 10))
				}
				order.RLock()
				now := vclock.Add(step)
				at := t0.Add(time.Duration(now))
				n := (1 + (i+w)%3) * unit
				if i%4 == 0 {
					r, ok := b.ReserveAt(at, n, maxWait)
					if ok {
						oks.Add(1)
						if i%8 == 0 {
							r.Cancel()
						} else {
							kept.Add(int64(r.Tokens()))
							act := now + int64(r.Delay())
							for cur := lastAct.Load(); act > cur && !lastAct.CompareAndSwap(cur, act); cur = lastAct.Load() {
							}
						}
					}
				} else if b.AllowAt(at, n) {
					oks.Add(1)
					kept.Add(int64(n))
				}
				if tk := b.TokensAt(at); tk > float64(burst)*(1+1e-9) {
					t.Errorf("tokens %v above burst %d", tk, burst)
				}
				order.RUnlock()
			}
		})
	}
	wg.Wait()
	// Admissions are counted next to the state word and moved to the
	// bucket when a setter or a rebase retires the state; none may be lost.
	if got, want := b.Stats().Admitted, oks.Load(); got != want {
		t.Errorf("Stats().Admitted = %d, want %d", got, want)
	}
	end := max(vclock.Load(), lastAct.Load())
	if s := b.st.Load(); !withSetters && s.Lim < end && s.base == base0 {
		t.Errorf("%v of virtual time with a base range of %v: no rebase happened", time.Duration(end), time.Duration(s.Lim))
	}
	refill := 0.0
	for i := range ats {
		until := end
		if i+1 < len(ats) {
			until = ats[i+1]
		}
		refill += rates[i] * float64(until-ats[i]) / 1e9
	}
	// A reservation acts at the time it was promised. When the rate drops
	// while reservations wait, their debt is repaid at the new rate but
	// they act on the old schedule: up to (old-new)·maxWait tokens beyond
	// the integral (see SetRate).
	slack := 0.0
	for i := 1; i < len(rates); i++ {
		slack += max(rates[i-1]-rates[i], 0) * maxWait.Seconds()
	}
	bound := refill*(1+1.0/(1<<15)) + float64(burst) + slack + 1e-3*float64(unit)
	t.Logf("kept %d tokens, bound %.1f, %d rate changes", kept.Load(), bound, len(ats)-1)
	if got := kept.Load(); float64(got) > bound || got == 0 {
		t.Errorf("kept %d tokens over %v, bound %.1f", got, time.Duration(end), bound)
	}
}
