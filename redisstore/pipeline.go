package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call on its way to Redis. Calls are pooled, with
// their context and its timer: a decision allocates none of them.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	keyBuf [1]string
	argBuf [gcraArgs]any
	// deadline (store clock) is when the decision must have its answer:
	// its start plus Config.Timeout.
	deadline int64
	ctx      *deadlineCtx
	done     chan result // buffered 1: the pipeline never blocks on it
	// state: callQueued until a flusher sends the call (callTaken) or
	// its caller gives up first (callAbandoned); one CAS decides, so a
	// call given up in the queue is never sent.
	state atomic.Uint32
	// trip identifies the round trip that carried the call (0: none), so
	// that the breaker counts a failed round trip once, not once per call
	// in it. Stored before the flusher takes the call: a caller that
	// finds it taken sees it.
	trip atomic.Uint64
}

const (
	callQueued uint32 = iota
	callTaken
	callAbandoned
)

type result struct {
	val any
	err error
}

var callPool = sync.Pool{New: func() any {
	return &call{done: make(chan result, 1), ctx: newDeadlineCtx()}
}}

func getCall(script *redis.Script) *call {
	c := callPool.Get().(*call)
	c.script = script
	return c
}

// putCall returns a call whose result its caller has read and whose
// context did not expire: nothing else holds it any more.
func putCall(c *call) {
	c.script, c.keys, c.args = nil, nil, nil
	c.keyBuf = [1]string{}
	c.argBuf = [gcraArgs]any{}
	callPool.Put(c)
}

// deadlineCtx is a context that ends at a deadline, reusable: its timer
// and channel live as long as it, while context.WithTimeout cost a
// microsecond and five allocations per decision. go-redis reads Deadline
// for its socket deadlines, and waits on Done for a connection being
// dialed. Once it has expired it cannot be armed again: drop it.
type deadlineCtx struct {
	d     time.Time
	done  chan struct{}
	timer *time.Timer // closes done at d
}

func newDeadlineCtx() *deadlineCtx {
	c := &deadlineCtx{done: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, func() { close(c.done) })
	c.timer.Stop()
	return c
}

// arm starts the context's time: it ends at d, which is in from now. The
// caller has both from the store's clock, read once per decision: a clock
// read costs tens of nanoseconds on a VM.
func (c *deadlineCtx) arm(d time.Time, in time.Duration) {
	c.d = d
	c.timer.Reset(in)
}

// disarm stops the timer and reports whether the context may be armed
// again (it had not expired).
func (c *deadlineCtx) disarm() bool { return c.timer.Stop() }

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.d, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Value(any) any               { return nil }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// giveUp is when a call stops waiting for Redis (go-redis's deadline, and
// a queued caller's), so that the decision answers by its deadline, t0 +
// Timeout, even though Go's timers fire late: an idle runtime sleeps in
// whole milliseconds (epoll_wait), so a timer fires up to about a
// millisecond after its time (measured: a 3.75 ms timer fired at 4.3 ms
// median, 4.7 ms at p99, on a loaded 2-core machine), and then go-redis
// unwinds and the failure policy answers. The margin is min(Timeout/2,
// 2 ms): with the default 5 ms, Redis has 3 ms to answer.
func (s *Store) giveUp(c *call) int64 {
	return c.deadline - int64(min(s.cfg.Timeout/2, 2*time.Millisecond))
}

// at is the wall-clock time of a store-clock instant.
func (s *Store) at(t int64) time.Time { return s.start.Add(time.Duration(t)) }

// pipelined hands a call made at now to the flushers and waits for its
// answer until giveUp. It reports whether c may be reused (no flusher
// holds it, its context did not expire).
func (s *Store) pipelined(c *call, now int64) (result, bool) {
	c.state.Store(callQueued)
	c.trip.Store(0)
	g := s.giveUp(c)
	c.ctx.arm(s.at(g), time.Duration(g-now))
	select {
	case s.queue <- c:
	case <-c.ctx.done:
		return result{err: errUnsent}, false
	case <-s.quit:
		return result{err: ErrClosed}, c.ctx.disarm()
	}
	select {
	case r := <-c.done:
		return r, c.ctx.disarm()
	case <-c.ctx.done:
		// c is abandoned: the queue or a pipeline still holds it.
		if c.state.CompareAndSwap(callQueued, callAbandoned) {
			return result{err: errUnsent}, false
		}
		return result{err: ErrTimeout}, false
	case <-s.quit:
		c.ctx.disarm()
		return result{err: ErrClosed}, false
	}
}

// flusher sends the queued calls in pipelines: it takes one call, adds
// those already queued, lingers up to BatchWindow for more when it has at
// least two (a lone caller never waits), and sends them in one round trip.
func (s *Store) flusher() {
	defer s.wg.Done()
	batch := make([]*call, 0, s.cfg.MaxBatch)
	var p pipe
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case c := <-s.queue:
			batch = append(batch, c)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case c := <-s.queue:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		if len(batch) > 1 && len(batch) < s.cfg.MaxBatch && s.cfg.BatchWindow > 0 {
			linger.Reset(s.cfg.BatchWindow)
		wait:
			for len(batch) < s.cfg.MaxBatch {
				select {
				case c := <-s.queue:
					batch = append(batch, c)
				case <-linger.C:
					break wait
				}
			}
			linger.Stop()
		}
		s.send(&p, batch)
		clear(batch)
		batch = batch[:0]
	}
}

// pipe is a flusher's reusable buffers.
type pipe struct {
	live, merged []*call
	keys         []string
	args         []any
	cmds         []*redis.Cmd
	ctx          *deadlineCtx
}

// send runs one round trip for batch. A call whose caller gave up is
// skipped; one too late to get an answer in time is failed unsent. The
// decisions (gcraScript) go in one gcraBatchScript call when the client
// is a single node (until Redis refuses one with CROSSSLOT); the other
// calls, or all of them on a Cluster, as one EVALSHA each in a pipeline.
// A NOSCRIPT answer (a restarted or flushed Redis forgot the script) is
// retried with Run, which loads it.
//
// The round trip's deadline is the latest giveUp of its calls, not the
// earliest: a call about to give up would otherwise cut short the socket
// for all the others, failing calls that had milliseconds left. Each
// caller still stops waiting at its own giveUp (pipelined), and a reply
// that comes after is dropped.
func (s *Store) send(p *pipe, batch []*call) {
	now := s.now()
	end := int64(0)
	trip := s.tripIDs.Add(1)
	p.live = p.live[:0]
	for _, c := range batch {
		if s.giveUp(c) <= now {
			if c.state.CompareAndSwap(callQueued, callAbandoned) {
				c.done <- result{err: errUnsent}
			}
			continue
		}
		c.trip.Store(trip)
		if c.state.CompareAndSwap(callQueued, callTaken) {
			p.live = append(p.live, c)
			end = max(end, s.giveUp(c))
		}
	}
	if len(p.live) == 0 {
		return
	}
	s.roundTrips.Add(1)
	if p.ctx == nil {
		p.ctx = newDeadlineCtx()
	}
	p.ctx.arm(s.at(end), time.Duration(end-now))
	defer func() {
		if !p.ctx.disarm() {
			p.ctx = nil // expired: a new one next time
		}
	}()
	if len(p.live) == 1 {
		c := p.live[0]
		v, err := s.run(p.ctx, c)
		c.done <- result{v, err}
		return
	}
	pl := s.client.Pipeline()
	p.merged, p.keys, p.args, p.cmds = p.merged[:0], p.keys[:0], p.args[:0], p.cmds[:0]
	if s.merge.Load() {
		for _, c := range p.live {
			if c.script == gcraScript {
				p.merged = append(p.merged, c)
				p.keys = append(p.keys, c.keys...)
				p.args = append(p.args, c.args...)
			}
		}
	}
	var mergedCmd *redis.Cmd
	if len(p.merged) > 1 {
		mergedCmd = gcraBatchScript.EvalSha(p.ctx, pl, p.keys, p.args...)
	}
	for _, c := range p.live {
		if mergedCmd != nil && c.script == gcraScript {
			continue
		}
		p.cmds = append(p.cmds, c.script.EvalSha(p.ctx, pl, c.keys, c.args...))
	}
	_, _ = pl.Exec(p.ctx)
	i := 0
	for _, c := range p.live {
		if mergedCmd != nil && c.script == gcraScript {
			continue
		}
		v, err := p.cmds[i].Result()
		i++
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = c.script.Run(p.ctx, s.client, c.keys, c.args...).Result()
		}
		c.done <- result{v, err}
	}
	if mergedCmd != nil {
		v, err := mergedCmd.Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = gcraBatchScript.Run(p.ctx, s.client, p.keys, p.args...).Result()
		}
		if err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") {
			// A Cluster node or a proxy behind a single address: the
			// keys of one script call must share a slot. Stop merging
			// and send these decisions one script call each.
			s.merge.Store(false)
			s.crossSlot.Add(1)
			s.sendEach(p.ctx, p.merged)
		} else {
			var arr []any
			if err == nil {
				arr, err = splitReply(v, len(p.merged))
			}
			for j, c := range p.merged {
				if err != nil {
					c.done <- result{err: err}
				} else {
					c.done <- element(arr[j])
				}
			}
		}
	}
	clear(p.cmds)
	clear(p.keys)
	clear(p.args)
	clear(p.live)
	clear(p.merged)
}

// sendEach sends calls in one pipeline, one script call each, and hands
// each its answer.
func (s *Store) sendEach(ctx context.Context, calls []*call) {
	pl := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, pl, c.keys, c.args...)
	}
	_, _ = pl.Exec(ctx)
	for i, c := range calls {
		v, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = s.run(ctx, c)
		}
		c.done <- result{v, err}
	}
}

// run runs one call on its own (one round trip, EVALSHA, or EVAL if Redis
// does not know the script).
func (s *Store) run(ctx context.Context, c *call) (any, error) {
	return c.script.Run(ctx, s.client, c.keys, c.args...).Result()
}

// splitReply checks that a gcraBatchScript call answered an array of n
// elements, one per decision. Any other reply is ErrReply, never a panic.
func splitReply(v any, n int) ([]any, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, fmt.Errorf("%w: %T for %d decisions", ErrReply, v, n)
	}
	return arr, nil
}

// element is one decision's part of a merged script reply: its array, or
// the error Redis gave for that key alone.
func element(v any) result {
	if err, ok := v.(error); ok {
		return result{err: err}
	}
	return result{val: v}
}
