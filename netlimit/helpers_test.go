package netlimit

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// failAfter bounds how long a test waits for something that must happen
// promptly; it is a hang detector, not a timing assertion.
const failAfter = 10 * time.Second

// recv returns the next value from ch, failing the test if none comes.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failAfter):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func newConcurrency(t *testing.T, limit, queue int) *concurrency.Limiter {
	t.Helper()
	lim, err := concurrency.New(concurrency.Config{Limit: limit, MaxQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// serveOne starts a Listener over inner and accepts one connection, which
// holds the permit of cfg's one-slot Limiter; the Listener and both ends of
// the connection are closed when the test ends.
func serveOne(t *testing.T, inner *pipeListener, cfg Config) *Listener {
	t.Helper()
	ln, err := NewListener(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client := inner.dial()
	t.Cleanup(func() { client.Close() })
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ln
}

// loopback returns a Listener over a real TCP socket on 127.0.0.1.
func loopback(t *testing.T, cfg Config) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := NewListener(inner, cfg)
	if err != nil {
		inner.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pipeListener is an in-memory net.Listener over net.Pipe, for synctest
// bubbles, which cannot wait on real sockets. Its buffered channel plays
// the kernel's backlog.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener(backlog int) *pipeListener {
	return &pipeListener{conns: make(chan net.Conn, backlog), done: make(chan struct{})}
}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeListener) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return nil
}

func (p *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects a client; the server's end goes to the backlog.
func (p *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	p.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
