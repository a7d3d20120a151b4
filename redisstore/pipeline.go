package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call waiting for its pipeline.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	done   chan result // buffered 1: the pipeline never blocks on it
	// state: callQueued until a flusher takes the call (callTaken) or its
	// caller gives up first (callAbandoned); one CAS decides, so a call
	// abandoned in the queue is never sent.
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

var callPool = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

// pipelined hands a call to the flushers and waits for its answer, at most
// Timeout.
func (s *Store) pipelined(script *redis.Script, keys []string, args []any) result {
	c := callPool.Get().(*call)
	c.script, c.keys, c.args = script, keys, args
	c.state.Store(callQueued)
	timer := time.NewTimer(s.cfg.Timeout)
	defer timer.Stop()
	var r result
	select {
	case s.queue <- c:
		select {
		case r = <-c.done:
			c.script, c.keys, c.args = nil, nil, nil
			callPool.Put(c)
		case <-timer.C:
			// c is abandoned: the queue or a pipeline still holds it.
			r.err = ErrTimeout
			if c.state.CompareAndSwap(callQueued, callAbandoned) {
				r.err = errUnsent
			}
		case <-s.quit:
			r.err = ErrClosed
		}
	case <-timer.C:
		r.err = errUnsent
	case <-s.quit:
		r.err = ErrClosed
	}
	return r
}

// flusher sends the queued calls in pipelines: it takes one call, adds
// those already queued, lingers up to BatchWindow for more when it has at
// least two (a lone caller never waits), and sends them in one round trip.
func (s *Store) flusher() {
	defer s.wg.Done()
	batch := make([]*call, 0, s.cfg.MaxBatch)
	cmds := make([]*redis.Cmd, 0, s.cfg.MaxBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	take := func(c *call) {
		if c.state.CompareAndSwap(callQueued, callTaken) {
			batch = append(batch, c)
		} // else its caller gave up: dropped unsent
	}
	for {
		select {
		case c := <-s.queue:
			take(c)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case c := <-s.queue:
				take(c)
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
					take(c)
				case <-linger.C:
					break wait
				}
			}
			linger.Stop()
		}
		if len(batch) == 0 {
			continue
		}
		cmds = s.send(batch, cmds[:0])
		clear(batch)
		batch = batch[:0]
		clear(cmds)
	}
}

// send runs one pipeline of EVALSHA calls. A NOSCRIPT answer (a restarted
// or flushed Redis forgot the script) is retried with Run, which loads it.
func (s *Store) send(batch []*call, cmds []*redis.Cmd) []*redis.Cmd {
	s.batches.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), s.budget())
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		v, err := c.script.Run(ctx, s.client, c.keys, c.args...).Result()
		c.done <- result{v, err}
		return cmds
	}
	pipe := s.client.Pipeline()
	for _, c := range batch {
		cmds = append(cmds, c.script.EvalSha(ctx, pipe, c.keys, c.args...))
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range batch {
		v, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = c.script.Run(ctx, s.client, c.keys, c.args...).Result()
		}
		c.done <- result{v, err}
	}
	return cmds
}
