package netlimit

import (
	"context"
	"io"
	"net"
	"time"
)

// maxDrain bounds what a rejecter reads from a client after answering it.
const maxDrain = 64 << 10

// rejecter answers rejected connections until the Listener closes.
func (l *Listener) rejecter() {
	defer l.wg.Done()
	for {
		select {
		case r := <-l.rejects:
			l.answer(r.c, r.deadline, r.reply)
		case <-l.ctx.Done():
			return
		}
	}
}

// answer writes reply to c and closes it, by deadline (RejectTimeout
// after c was accepted); a connection picked up after its deadline is
// closed with no answer, and counted in Unanswered.
//
// Unless the server speaks first, it waits for the client's first bytes
// before writing (see Config.ServerSpeaksFirst); a client that sends nothing
// in time, or hangs up, is closed with no answer.
//
// After the write it half-closes c and reads until the client closes its
// side: closing a TCP socket with unread input makes the kernel send a
// reset, which can destroy the answer before the client reads it (an HTTP
// client has usually sent its request by then). net/http does the same in
// closeWriteAndWait.
func (l *Listener) answer(c net.Conn, deadline time.Time, reply []byte) {
	defer c.Close()
	if len(reply) == 0 {
		return
	}
	if !time.Now().Before(deadline) {
		l.unanswered.Add(1)
		return
	}
	stop := context.AfterFunc(l.ctx, func() { c.Close() })
	defer stop()
	if c.SetDeadline(deadline) != nil {
		return
	}
	if !l.cfg.ServerSpeaksFirst {
		var buf [512]byte
		if _, err := c.Read(buf[:]); err != nil {
			return
		}
	}
	if _, err := c.Write(reply); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		io.Copy(io.Discard, io.LimitReader(c, maxDrain))
	}
}
