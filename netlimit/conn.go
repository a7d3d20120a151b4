package netlimit

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Conn is a connection returned by Listener.Accept. It is the accepted
// net.Conn with a Close that releases the connection's permit.
type Conn struct {
	net.Conn
	l      *Listener
	permit sluice.Permit
	opened time.Time
	closed atomic.Bool
}

// handOut wraps an admitted connection for Accept's caller.
func (l *Listener) handOut(a accepted) *Conn {
	l.counters.Admit()
	l.open.Add(1)
	return &Conn{Conn: a.c, l: l, permit: a.p, opened: time.Now()}
}

// Close closes the connection and, the first time only, releases its
// permit (with sluice.Ignore and the time it was open). Calling Close again
// returns the inner connection's error for a second close and releases
// nothing.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.permit.Release(sluice.Ignore, time.Since(c.opened))
		c.l.open.Add(-1)
	}
	return err
}

// ReadFrom copies r to the connection with the accepted connection's own
// ReadFrom when it has one (a *net.TCPConn's sendfile or splice, which
// net/http uses to send a file), and with a plain copy otherwise: embedding
// net.Conn alone would hide it. Conn has no CloseWrite: it could only have
// one for every connection, and claim a half-close that a connection
// without one (net.Pipe's) cannot do; NetConn reaches it.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

// NetConn returns the connection accepted from the inner listener (a
// *net.TCPConn for a TCP listener), for its socket options. Close the Conn,
// not the one returned here, or the permit is never released.
func (c *Conn) NetConn() net.Conn { return c.Conn }
