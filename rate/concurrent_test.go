package rate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines take tokens at a shared virtual clock while a setter
// changes the rate and the burst. Over the whole virtual interval the
// tokens kept (taken minus cancelled) stay within maxRate·T + maxBurst, and
// the bucket never holds more than its burst. Run with -race: this is the
// test of the lock-free path and of the retire-and-swap in the setters.
func TestConcurrentBound(t *testing.T) {
	const (
		rate    = 1000.0 // per virtual second
		burst   = 20
		workers = 8
		ops     = 5000
		step    = int64(time.Second / rate / 4) // 4 clock steps per token
	)
	for _, withSetters := range []bool{false, true} {
		b := mustBucket(t, Config{Rate: rate, Burst: burst})
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
			done  = make(chan struct{})
			// rates[i] holds from at[i] on; the bound integrates them.
			ats   = []int64{0}
			rates = []float64{rate}
		)
		for w := range workers {
			wg.Go(func() {
				for i := range ops {
					order.RLock()
					now := vclock.Add(step)
					at := t0.Add(time.Duration(now))
					n := 1 + (i+w)%3
					if i%4 == 0 {
						r, ok := b.ReserveAt(at, n, 5*time.Millisecond)
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
					if tk := b.TokensAt(at); tk > burst {
						t.Errorf("tokens %v above burst %d", tk, burst)
					}
					order.RUnlock()
				}
			})
		}
		var setterWG sync.WaitGroup
		if withSetters {
			setterWG.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					order.Lock()
					now := vclock.Load()
					at := t0.Add(time.Duration(now))
					r := []float64{rate / 2, rate / 10, rate}[i%3]
					if err := b.SetRateAt(at, r); err != nil {
						t.Error(err)
					}
					ats, rates = append(ats, now), append(rates, r)
					if err := b.SetBurstAt(at, []int{burst, burst / 2, 1}[i%3]); err != nil {
						t.Error(err)
					}
					order.Unlock()
				}
			})
		}
		wg.Wait()
		close(done)
		setterWG.Wait()
		// Admissions are counted next to the state word and moved to the
		// bucket when a setter retires the state; none may be lost.
		if got, want := b.Stats().Admitted, oks.Load(); got != want {
			t.Errorf("setters %v: Stats().Admitted = %d, want %d", withSetters, got, want)
		}
		end := max(vclock.Load(), lastAct.Load())
		refill := 0.0
		for i := range ats {
			until := end
			if i+1 < len(ats) {
				until = ats[i+1]
			}
			refill += rates[i] * float64(until-ats[i]) / 1e9
		}
		bound := refill*(1+1.0/(1<<15)) + burst + 1e-3
		t.Logf("setters %v: kept %d bound %.1f", withSetters, kept.Load(), bound)
		if got := kept.Load(); float64(got) > bound || got == 0 {
			t.Errorf("setters %v: kept %d tokens over %v, bound %.1f", withSetters, got, time.Duration(end), bound)
		}
	}
}
