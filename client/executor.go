package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Executor runs tasks with at most N at once. Go blocks the submitter while
// all N slots are busy and starts the task the moment one frees: there are
// no batches, so a slow task never holds back the ones behind it (the head
// of line blocking of "start N, wait for all N, repeat"), and the server
// sees a steady N in flight instead of a thundering herd.
//
// Only the running tasks have goroutines: a caller with ten thousand tasks
// holds N goroutines, not ten thousand. Wait returns when every started task
// has finished, with their errors joined. An Executor can be reused after
// Wait. Safe for concurrent use.
type Executor struct {
	slots chan struct{} // a buffered token per running task

	mu      sync.Mutex
	idle    sync.Cond // signalled when running drops to 0; L is &mu
	running int       // tasks started and not yet finished
	errs    []error

	started, failed atomic.Uint64
}

// NewExecutor returns an Executor that runs at most n tasks at once, or an
// *sluice.ConfigError if n < 1.
func NewExecutor(n int) (*Executor, error) {
	if n < 1 {
		return nil, invalid("NewExecutor(n)", n, "must be >= 1")
	}
	e := &Executor{slots: make(chan struct{}, n)}
	e.idle.L = &e.mu
	return e, nil
}

// Go waits for a free slot, then starts task(ctx) in a new goroutine and
// returns nil. If ctx ends first, the task never runs and Go returns
// ctx.Err(): cancelling the context stops the tasks still waiting to be
// submitted, and the running ones see it through their ctx.
func (e *Executor) Go(ctx context.Context, task func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil { // both were ready and select picked the slot
		<-e.slots
		return err
	}
	e.started.Add(1)
	e.mu.Lock()
	e.running++
	e.mu.Unlock()
	go func() {
		returned := false
		var err error
		// Deferred: a task that ends its goroutine (runtime.Goexit, as
		// t.FailNow does) must still give its slot back, or Wait hangs.
		defer func() {
			if !returned {
				err = ErrTaskExited
			}
			e.done(err)
		}()
		err = task(ctx)
		returned = true
	}()
	return nil
}

// ErrTaskExited is a task's error when it ended its goroutine without
// returning: it called runtime.Goexit (t.FailNow does).
var ErrTaskExited = errors.New("sluice/client: task ended its goroutine without returning (runtime.Goexit)")

// done records a finished task and gives its slot back.
func (e *Executor) done(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.failed.Add(1)
		e.errs = append(e.errs, err)
	}
	<-e.slots // before Wait can return, so that Stats then shows no task in flight
	if e.running--; e.running == 0 {
		e.idle.Broadcast()
	}
}

// Wait blocks until no task is running and returns the errors of the tasks
// that finished since the last Wait, joined with errors.Join (nil if none
// failed). Tasks that Go starts while Wait runs may or may not be waited for.
func (e *Executor) Wait() error {
	// A count of running tasks rather than taking every slot: that would
	// cost n channel operations per Wait, forever for an absurd n.
	e.mu.Lock()
	for e.running > 0 {
		e.idle.Wait()
	}
	errs := e.errs
	e.errs = nil
	e.mu.Unlock()
	return errors.Join(errs...)
}

// ExecutorStats is a snapshot of an Executor.
type ExecutorStats struct {
	Limit    int    // the most tasks that run at once
	InFlight int    // tasks running now
	Started  uint64 // tasks started since creation
	Failed   uint64 // tasks that returned an error
}

// Stats returns a snapshot.
func (e *Executor) Stats() ExecutorStats {
	return ExecutorStats{
		Limit:    cap(e.slots),
		InFlight: len(e.slots),
		Started:  e.started.Load(),
		Failed:   e.failed.Load(),
	}
}
