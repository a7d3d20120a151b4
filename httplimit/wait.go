package httplimit

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/rate"
)

// The defaults that bound a request's wait for admission (NoWait false). A
// wait without them holds a goroutine, a connection and, in a token
// bucket, a debt for as long as the client keeps the request open: 200
// concurrent requests from one client over its rate drove a bucket 198
// tokens into debt and a server from 3 to 402 goroutines.
const (
	defaultMaxWait          = time.Second
	defaultMaxWaiting       = 1024
	defaultMaxWaitingPerKey = 8
	// waitSlots is the number of per-key waiter counters. Keys share them
	// by hash, so the per-key cap is per slot: two keys that share a slot
	// share one cap (stricter, never looser), and the memory is fixed
	// whatever the keys (client input).
	waitSlots = 4096
)

// waiters counts the requests waiting for admission, in total and per key
// slot, so that both stay under their caps.
type waiters struct {
	maxWait   time.Duration
	max       int64
	maxPerKey int32
	seed      maphash.Seed
	total     atomic.Int64
	perKey    *[waitSlots]atomic.Int32
}

// init validates c's wait bounds and applies their defaults.
func (w *waiters) init(c *Config) error {
	w.maxWait, w.max, w.maxPerKey = c.MaxWait, int64(c.MaxWaiting), int32(c.MaxWaitingPerKey)
	w.seed = maphash.MakeSeed()
	switch {
	case c.MaxWait < 0:
		return configErr("Config.MaxWait", c.MaxWait, "must be >= 0 (0: 1s)")
	case c.MaxWaiting < 0:
		return configErr("Config.MaxWaiting", c.MaxWaiting, "must be >= 0 (0: 1024)")
	case c.MaxWaitingPerKey < 0 || c.MaxWaitingPerKey > 1<<30:
		return configErr("Config.MaxWaitingPerKey", c.MaxWaitingPerKey, "must be 0 (default 8) to 2^30")
	}
	if w.maxWait == 0 {
		w.maxWait = defaultMaxWait
	}
	if w.max == 0 {
		w.max = defaultMaxWaiting
	}
	if w.maxPerKey == 0 {
		w.maxPerKey = defaultMaxWaitingPerKey
	}
	if c.PerKey != nil {
		w.perKey = new([waitSlots]atomic.Int32)
	}
	return nil
}

// enter counts a request that is about to wait, returning the slot to leave
// with, or a rejection when a cap is reached: the per-key cap is the
// client's share (429), the total the server's capacity (503).
func (w *waiters) enter(key string) (slot int, err error) {
	slot = -1
	if w.perKey != nil {
		slot = int(maphash.String(w.seed, key) % waitSlots)
		if w.perKey[slot].Add(1) > w.maxPerKey {
			w.perKey[slot].Add(-1)
			return -1, &Rejection{Err: sluice.RejectQuota(sluice.ReasonQueueFull, 0), PerKey: true, Key: key}
		}
	}
	if w.total.Add(1) > w.max {
		w.leave(slot)
		return -1, &Rejection{Err: sluice.Reject(sluice.ReasonQueueFull, 0), Key: key}
	}
	return slot, nil
}

// leave undoes enter.
func (w *waiters) leave(slot int) {
	if slot >= 0 {
		w.perKey[slot].Add(-1)
	}
	w.total.Add(-1)
}

// timedOut turns a wait that ran out of the middleware's MaxWait (the
// limiter returned the deadline's error, the request's own context is
// live) into a rejection.
func timedOut(req, wait context.Context, err error) error {
	if err == nil || req.Err() != nil || wait.Err() == nil ||
		errors.Is(err, sluice.ErrRejected) || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return sluice.Reject(sluice.ReasonQueueTimeout, 0)
}

// waitCtx is the context the limiters wait with: the request's, with a
// deadline MaxWait away. It makes the timer behind that deadline only when
// a limiter blocks on Done: a request admitted at once (the common case)
// costs no timer. Its Err reads the clock, so a limiter that checks Err
// without blocking sees the deadline on time.
//
// A waitCtx is pooled only when every limiter it is handed to is one of
// the library's own (see ownLimiter), which keep no context past Acquire.
// Any other limiter gets a fresh one that stays valid after the request:
// a limiter may derive a context from it (context.WithTimeout), and Go
// then watches it with a goroutine that calls Done after Acquire has
// returned. A pooled one would by then be nil (a panic that kills the
// process) or another request's.
type waitCtx struct {
	context.Context // the request's
	deadline        time.Time
	inner           atomic.Pointer[timed]
	pooled          bool
}

// timed is a waitCtx's real context, made on the first Done.
type timed struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// over is the inner context of a freed, unpooled waitCtx: the wait is
// over, so a Done after the request returns a closed channel.
var over = func() *timed {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return &timed{ctx, cancel}
}()

var waitCtxs = sync.Pool{New: func() any { return new(waitCtx) }}

func newWaitCtx(parent context.Context, maxWait time.Duration, pooled bool) *waitCtx {
	var c *waitCtx
	if pooled {
		c = waitCtxs.Get().(*waitCtx)
	} else {
		c = new(waitCtx)
	}
	c.Context, c.deadline, c.pooled = parent, time.Now().Add(maxWait), pooled
	return c
}

// free stops the timer, if one was made, and pools c if it may be.
func (c *waitCtx) free() {
	if !c.pooled {
		if t := c.inner.Swap(over); t != nil {
			t.cancel()
		}
		return
	}
	if t := c.inner.Swap(nil); t != nil {
		t.cancel()
	}
	c.Context = nil
	waitCtxs.Put(c)
}

// ownLimiter reports whether l is nil or one of the library's limiters,
// whose Acquire only reads the context (Done, Err, Deadline) while it
// runs. Compositions are not: they hand the context to limiters of any
// kind.
func ownLimiter(l any) bool {
	switch l.(type) {
	case nil, *rate.Bucket, *concurrency.Limiter, *keyed.Buckets,
		*keyed.Map[*rate.Bucket], *keyed.Map[*concurrency.Limiter]:
		return true
	}
	return false
}

func (c *waitCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *waitCtx) Done() <-chan struct{} {
	t := c.inner.Load()
	if t == nil {
		ctx, cancel := context.WithDeadline(c.Context, c.deadline)
		t = &timed{ctx, cancel}
		if !c.inner.CompareAndSwap(nil, t) {
			cancel()
			t = c.inner.Load()
		}
	}
	return t.ctx.Done()
}

func (c *waitCtx) Err() error {
	if t := c.inner.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
