package netlimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/counter"
)

// Listener is a net.Listener that admits connections through a limiter and
// answers the rest with a fixed response. Create it with NewListener; it is
// safe for concurrent use, like any net.Listener.
type Listener struct {
	inner net.Listener
	cfg   Config

	// ctx ends every wait (the rate wait, Limiter.Acquire, handing a
	// connection to Accept, a rejecter's answer) when Close is called.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop, waiters and rejecters

	ready    chan accepted // connections (or errors) for Accept
	loopDone chan struct{} // closed when the accept loop has stopped
	loopErr  error         // why it stopped; written before loopDone closes
	rejects  chan rejected // rejected connections waiting for a rejecter

	pending    atomic.Int64 // connections with a waiter: in Limiter.Acquire, then for Accept
	open       atomic.Int64 // connections handed out and not closed
	unanswered atomic.Uint64
	counters   counter.Counters

	closeOnce sync.Once
}

// rejected is a rejected connection and the time by which it must be
// answered: RejectTimeout from its accept, however long it waited for the
// limiter or a rejecter, so that a burst is answered on time or not at all.
type rejected struct {
	c        net.Conn
	deadline time.Time
	reply    []byte
}

// accepted is a connection admitted with its permit, or an error of the
// inner listener to pass on to Accept.
type accepted struct {
	c   net.Conn
	p   sluice.Permit
	err error
}

// NewListener starts limiting inner. The Listener owns inner from now on:
// Close closes it.
func NewListener(inner net.Listener, cfg Config) (*Listener, error) {
	if inner == nil {
		return nil, invalid("inner", nil, "the listener to wrap must not be nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		inner:    inner,
		cfg:      cfg,
		ctx:      ctx,
		cancel:   cancel,
		ready:    make(chan accepted),
		loopDone: make(chan struct{}),
		rejects:  make(chan rejected, cfg.RejectQueue),
	}
	l.wg.Add(1 + cfg.Rejecters)
	go l.loop()
	for range cfg.Rejecters {
		go l.rejecter()
	}
	return l, nil
}

// Accept waits for the next admitted connection. Close the returned
// connection (a *Conn) to release its permit. After Close, or once the
// inner listener has failed for good, Accept returns an error that matches
// net.ErrClosed or the inner listener's error.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case a := <-l.ready:
		if a.err != nil {
			return nil, a.err
		}
		return l.handOut(a), nil
	case <-l.loopDone:
		return nil, l.loopErr
	case <-l.ctx.Done():
		return nil, &net.OpError{Op: "accept", Net: l.inner.Addr().Network(), Addr: l.inner.Addr(), Err: net.ErrClosed}
	}
}

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close closes the inner listener, ends every wait, closes the connections
// that were accepted from the kernel but not handed out by Accept, and
// returns once every goroutine the Listener started has stopped.
// Connections already returned by Accept stay open: they are the server's.
// Close returns the inner listener's Close error; later calls return nil.
func (l *Listener) Close() error {
	// Only the call that closes reports the inner Close's error; a later
	// one closed nothing, so it has nothing to report.
	var err error
	l.closeOnce.Do(func() {
		l.cancel()
		err = l.inner.Close()
		l.wg.Wait()
		// Every sender has stopped: what is left in the queue is ours.
		for {
			select {
			case r := <-l.rejects:
				r.c.Close()
				continue
			default:
			}
			break
		}
	})
	return err
}

// Stats reports the connections handed out by Accept (Admitted), the
// rejections by reason, the connections open now (InFlight: handed out and
// not yet closed), the connections waiting for the limiter and, once it
// admits them, for Accept (Queued: the ones MaxPending caps), and the
// Limiter's limit (or, without one, the AcceptRate's rate).
func (l *Listener) Stats() sluice.Stats {
	s := sluice.Stats{InFlight: int(l.open.Load()), Queued: int(l.pending.Load())}
	l.counters.Fill(&s)
	switch {
	case l.cfg.Limiter != nil:
		s.Limit = l.cfg.Limiter.Stats().Limit
	case l.cfg.AcceptRate != nil:
		s.Limit = l.cfg.AcceptRate.Stats().Limit
	}
	return s
}

// Unanswered counts rejected connections closed without the Reject
// response because every rejecter was busy and the reject queue full, or
// because a rejecter took them only after their RejectTimeout (counted
// from accept) had passed. They are also counted in Stats' Rejected.
func (l *Listener) Unanswered() uint64 { return l.unanswered.Load() }

// loop takes connections from the kernel and decides on each.
func (l *Listener) loop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				l.loopErr = err
				close(l.loopDone)
				return
			}
			// Pass anything else (EMFILE, a timeout) to the server, as a
			// plain listener would: its accept loop decides whether to
			// back off or give up.
			select {
			case l.ready <- accepted{err: err}:
			case <-l.ctx.Done():
				return
			}
			continue
		}
		l.decide(c, time.Now())
	}
}

// decide runs one connection through the rate limit and the limiter. It
// waits only for a rate token (by design, seed 004) and never for the
// limiter: waiting for a permit happens in a goroutine of its own.
func (l *Listener) decide(c net.Conn, at time.Time) {
	if b := l.cfg.AcceptRate; b != nil {
		if l.cfg.RejectOverRate {
			if !b.Allow() {
				l.reject(c, at, sluice.ReasonRate, true)
				return
			}
		} else if err := b.Wait(l.ctx); err != nil {
			if l.ctx.Err() != nil {
				c.Close()
				return
			}
			l.reject(c, at, sluice.ReasonOf(err), errors.Is(err, sluice.ErrQuota))
			return
		}
	}
	lim := l.cfg.Limiter
	if lim == nil {
		l.deliver(c, sluice.Permit{})
		return
	}
	p, err := lim.TryAcquire()
	if err == nil {
		l.deliver(c, p)
		return
	}
	if l.pending.Add(1) > int64(l.cfg.MaxPending) {
		l.pending.Add(-1)
		l.reject(c, at, sluice.ReasonQueueFull, false)
		return
	}
	l.wg.Add(1)
	go l.wait(c, at)
}

// wait waits in the limiter's queue for a permit for c, then for Accept
// to take c. It leaves pending only then: a limiter whose permits do not
// bound the connections open (a rate.Bucket) would otherwise admit one
// waiter's connection after another while Accept is not called, each held
// open in a goroutine, with nothing bounding or counting them.
func (l *Listener) wait(c net.Conn, at time.Time) {
	defer l.wg.Done()
	defer l.pending.Add(-1)
	p, err := l.cfg.Limiter.Acquire(l.ctx)
	switch {
	case err == nil:
		l.deliver(c, p)
	case l.ctx.Err() != nil && sluice.ReasonOf(err) == sluice.ReasonUnknown:
		c.Close() // the Listener is closing
	default:
		l.reject(c, at, sluice.ReasonOf(err), errors.Is(err, sluice.ErrQuota))
	}
}

// deliver hands an admitted connection to Accept.
func (l *Listener) deliver(c net.Conn, p sluice.Permit) {
	select {
	case l.ready <- accepted{c: c, p: p}:
	case <-l.ctx.Done():
		p.Cancel()
		c.Close()
	}
}

// busyReply and quotaReply are the default answers (see Config.Reject).
var busyReply, quotaReply = []byte(defaultReject), []byte(defaultQuotaReply)

// reject counts c's rejection and queues it for a rejecter; if none can
// take it, c is closed with no answer rather than stall the caller. quota
// says the rejection is a quota's (sluice.ErrQuota), which the default
// answer tells apart.
func (l *Listener) reject(c net.Conn, at time.Time, r sluice.Reason, quota bool) {
	l.counters.Reject(r)
	reply := l.cfg.Reject
	switch {
	case reply != nil:
	case quota:
		reply = quotaReply
	default:
		reply = busyReply
	}
	select {
	case l.rejects <- rejected{c, at.Add(l.cfg.RejectTimeout), reply}:
	default:
		l.unanswered.Add(1)
		c.Close()
	}
}
