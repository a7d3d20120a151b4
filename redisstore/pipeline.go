package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call on its way to Redis. Calls are pooled: a
// decision allocates none of this, nor a timer.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	keyBuf [1]string
	argBuf [gcraArgs]any
	// deadline (store clock) is when the decision must have its answer:
	// its start plus Config.Timeout.
	deadline int64
	ctx      deadlineCtx
	done     chan result // buffered 1: the pipeline never blocks on it
	timer    *time.Timer
	// state: callQueued until a flusher sends the call (callTaken) or
	// its caller gives up first (callAbandoned); one CAS decides, so a
	// call given up in the queue is never sent.
	state atomic.Uint32
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
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan result, 1), timer: t}
}}

func getCall(script *redis.Script) *call {
	c := callPool.Get().(*call)
	c.script = script
	return c
}

// putCall returns a call whose result its caller has read: nothing else
// holds it any more.
func putCall(c *call) {
	c.script, c.keys, c.args = nil, nil, nil
	c.keyBuf = [1]string{}
	c.argBuf = [gcraArgs]any{}
	callPool.Put(c)
}

// deadlineCtx is a context with a deadline and no timer: go-redis reads
// only Deadline from it (socket deadlines with ContextTimeoutEnabled, the
// dial), which is all a store call needs, while context.WithTimeout cost a
// microsecond and five allocations per decision. Done is nil: nothing
// waits on it, since the store's own wait bounds a queued caller; the
// pool wait it would have cut short is bounded by PoolTimeout (Open sets
// it to Timeout).
type deadlineCtx struct{ d time.Time }

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.d, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return nil }
func (c *deadlineCtx) Value(any) any               { return nil }
func (c *deadlineCtx) Err() error {
	if time.Now().Before(c.d) {
		return nil
	}
	return context.DeadlineExceeded
}

// Deadlines of a call that starts at t0 with Timeout d, so that the
// decision answers by t0+d: go-redis gets until t0+d-d/5 (past a socket
// deadline it still closes the connection and unwinds: measured up to
// about a millisecond on a loaded machine), and a queued caller stops
// waiting at t0+d-d/10 (a goroutine woken by its timer may run a little
// late; the failure policy then answers at once).
func (s *Store) redisDeadline(c *call) int64 { return c.deadline - int64(s.cfg.Timeout/5) }
func (s *Store) giveUp(c *call) int64        { return c.deadline - int64(s.cfg.Timeout/10) }

// pipelined hands a call to the flushers and waits for its answer until
// giveUp. It reports whether c may be reused (no flusher holds it).
func (s *Store) pipelined(c *call) (result, bool) {
	c.state.Store(callQueued)
	c.timer.Reset(time.Duration(s.giveUp(c) - s.now()))
	select {
	case s.queue <- c:
	case <-c.timer.C:
		return result{err: errUnsent}, true
	case <-s.quit:
		c.timer.Stop()
		return result{err: ErrClosed}, true
	}
	select {
	case r := <-c.done:
		c.timer.Stop()
		return r, true
	case <-c.timer.C:
		// c is abandoned: the queue or a pipeline still holds it.
		if c.state.CompareAndSwap(callQueued, callAbandoned) {
			return result{err: errUnsent}, false
		}
		return result{err: ErrTimeout}, false
	case <-s.quit:
		c.timer.Stop()
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
	ctx          deadlineCtx
}

// send runs one round trip for batch. A call whose caller gave up is
// skipped; one too late to get an answer in time is failed unsent. The
// decisions (gcraScript) go in one script call when the client is a
// single node; the other calls, or all of them on a Cluster, as one
// EVALSHA each in a pipeline. A NOSCRIPT answer (a restarted or flushed
// Redis forgot the script) is retried with Run, which loads it.
func (s *Store) send(p *pipe, batch []*call) {
	now := s.now()
	end := int64(1<<63 - 1)
	p.live = p.live[:0]
	for _, c := range batch {
		if s.redisDeadline(c) <= now {
			if c.state.CompareAndSwap(callQueued, callAbandoned) {
				c.done <- result{err: errUnsent}
			}
			continue
		}
		if c.state.CompareAndSwap(callQueued, callTaken) {
			p.live = append(p.live, c)
			end = min(end, s.redisDeadline(c))
		}
	}
	if len(p.live) == 0 {
		return
	}
	s.roundTrips.Add(1)
	p.ctx.d = s.start.Add(time.Duration(end))
	if len(p.live) == 1 {
		c := p.live[0]
		v, err := s.run(&p.ctx, c)
		c.done <- result{v, err}
		return
	}
	pl := s.client.Pipeline()
	p.merged, p.keys, p.args, p.cmds = p.merged[:0], p.keys[:0], p.args[:0], p.cmds[:0]
	if s.merge {
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
		mergedCmd = gcraScript.EvalSha(&p.ctx, pl, p.keys, p.args...)
	}
	for _, c := range p.live {
		if mergedCmd != nil && c.script == gcraScript {
			continue
		}
		p.cmds = append(p.cmds, c.script.EvalSha(&p.ctx, pl, c.keys, c.args...))
	}
	_, _ = pl.Exec(&p.ctx)
	i := 0
	for _, c := range p.live {
		if mergedCmd != nil && c.script == gcraScript {
			continue
		}
		v, err := p.cmds[i].Result()
		i++
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = c.script.Run(&p.ctx, s.client, c.keys, c.args...).Result()
		}
		c.done <- reply(c, v, err)
	}
	if mergedCmd != nil {
		v, err := mergedCmd.Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = gcraScript.Run(&p.ctx, s.client, p.keys, p.args...).Result()
		}
		arr, ok := v.([]any)
		if err == nil && (!ok || len(arr) != len(p.merged)) {
			err = fmt.Errorf("%w: %d decisions answered for %d", ErrReply, len(arr), len(p.merged))
		}
		for j, c := range p.merged {
			if err != nil {
				c.done <- result{err: err}
			} else {
				c.done <- element(arr[j])
			}
		}
	}
	clear(p.cmds)
	clear(p.keys)
	clear(p.args)
	clear(p.live)
	clear(p.merged)
}

// run runs one call on its own (one round trip, EVALSHA, or EVAL if Redis
// does not know the script).
func (s *Store) run(ctx context.Context, c *call) (any, error) {
	v, err := c.script.Run(ctx, s.client, c.keys, c.args...).Result()
	r := reply(c, v, err)
	return r.val, r.err
}

// reply is the result of c given the reply of its own script call: a
// decision's script answers an array of one element per key.
func reply(c *call, v any, err error) result {
	if err != nil || c.script != gcraScript {
		return result{v, err}
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 1 {
		return result{err: fmt.Errorf("%w: %T %v", ErrReply, v, v)}
	}
	return element(arr[0])
}

// element is one decision's part of a script reply: its array, or the
// error Redis gave for that key alone.
func element(v any) result {
	if err, ok := v.(error); ok {
		return result{err: err}
	}
	return result{val: v}
}
