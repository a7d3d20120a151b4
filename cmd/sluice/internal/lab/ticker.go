package lab

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// ticker is seed 000's limiter on real time, the baseline the seed
// measured and not sluice code: a time.Ticker puts a token every 1/rate
// into a channel buffered to burst (prefilled), and a request takes one,
// waiting up to maxWait (0: as long as its context allows) among at most
// queue waiters (-1: any number). It is the simulator's ticker policy
// (package sim) with a clock.
type ticker struct {
	tokens  chan struct{}
	maxWait time.Duration
	queue   int
	rate    float64

	waiting  atomic.Int64
	admitted atomic.Uint64
	rejected [sluice.NumReasons]atomic.Uint64

	stop chan struct{}
	done sync.WaitGroup
}

func newTicker(rate float64, burst, queue int, maxWait time.Duration) *ticker {
	t := &ticker{tokens: make(chan struct{}, max(burst, 1)), maxWait: maxWait, queue: queue, rate: rate, stop: make(chan struct{})}
	for range cap(t.tokens) {
		t.tokens <- struct{}{}
	}
	t.done.Add(1)
	go t.run(time.Duration(float64(time.Second) / rate))
	return t
}

func (t *ticker) run(every time.Duration) {
	defer t.done.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	t.feed(tk.C, time.Now(), every)
}

// feed puts a token into the channel for every tick due since start, until
// Close. A time.Ticker drops the ticks its reader was too late for, and on
// a busy machine at hundreds of ticks a second that is a share of the
// rate: seed 000's ticker + 75 ms lost up to a tenth of its successes that
// way on this shared machine. The seed's own ticker kept its rate (72% of
// 600 rps served is 425/s and the burst), as the simulator's does, so each
// tick that comes hands out the ones missed since the last.
func (t *ticker) feed(ticks <-chan time.Time, start time.Time, every time.Duration) {
	var given int64 // ticks turned into tokens, or dropped on a full channel
	for {
		select {
		case <-ticks:
			for due := int64(time.Since(start) / every); given < due; given++ {
				select {
				case t.tokens <- struct{}{}:
				default: // a full channel drops the tick, as the seed's did
				}
			}
		case <-t.stop:
			return
		}
	}
}

// Close stops the ticker's goroutine.
func (t *ticker) Close() {
	close(t.stop)
	t.done.Wait()
}

func (t *ticker) reject(r sluice.Reason) error {
	t.rejected[r%sluice.NumReasons].Add(1)
	return sluice.Reject(r, 0)
}

func (t *ticker) permit() sluice.Permit {
	t.admitted.Add(1)
	return sluice.NewPermit(tickerReleaser{}, 0)
}

// TryAcquire takes a token if one is there.
func (t *ticker) TryAcquire() (sluice.Permit, error) {
	select {
	case <-t.tokens:
		return t.permit(), nil
	default:
		return sluice.Permit{}, t.reject(sluice.ReasonRate)
	}
}

// Acquire waits for a token, up to maxWait and ctx.
func (t *ticker) Acquire(ctx context.Context) (sluice.Permit, error) {
	select {
	case <-t.tokens:
		return t.permit(), nil
	default:
	}
	if n := t.waiting.Add(1); t.queue >= 0 && n > int64(t.queue) {
		t.waiting.Add(-1)
		if t.queue == 0 {
			return sluice.Permit{}, t.reject(sluice.ReasonRate)
		}
		return sluice.Permit{}, t.reject(sluice.ReasonQueueFull)
	}
	defer t.waiting.Add(-1)
	var expired <-chan time.Time
	if t.maxWait > 0 {
		tm := time.NewTimer(t.maxWait)
		defer tm.Stop()
		expired = tm.C
	}
	select {
	case <-t.tokens:
		return t.permit(), nil
	case <-expired:
		return sluice.Permit{}, t.reject(sluice.ReasonQueueTimeout)
	case <-ctx.Done():
		return sluice.Permit{}, ctx.Err()
	}
}

// Stats reports the rate as the limit and the waiters as queued.
func (t *ticker) Stats() sluice.Stats {
	s := sluice.Stats{Limit: t.rate, Queued: int(t.waiting.Load()), Admitted: t.admitted.Load()}
	for i := range s.Rejected {
		s.Rejected[i] = t.rejected[i].Load()
	}
	return s
}

// tickerReleaser: a ticker's token is spent when taken, whatever the work
// does, as the seed's channel was.
type tickerReleaser struct{}

func (tickerReleaser) Release(uint64, sluice.Outcome, time.Duration) {}
func (tickerReleaser) Cancel(uint64)                                 {}
