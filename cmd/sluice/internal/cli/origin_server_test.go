package cli

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands the server the far ends of net.Pipe connections, so
// that the server's timeouts run on the synctest bubble's clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// closedBy reports whether the server closed c by now: a read returns EOF
// (or a closed-pipe error) at once instead of running into a deadline.
func closedBy(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := io.Copy(io.Discard, c)
	return err == nil || errors.Is(err, io.ErrClosedPipe)
}

// TestOriginServerTimeouts: sluice origin's http.Server closes a
// connection that sends no complete header (slowloris) and one left idle
// after a request, so that neither holds a socket and a goroutine for ever.
func TestOriginServerTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := originHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		ln := newPipeListener()
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()

		slow := ln.dial()
		defer slow.Close()
		go io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n") // and never the blank line
		synctest.Wait()
		time.Sleep(originReadHeaderTimeout - time.Second)
		if closedBy(slow) {
			t.Errorf("a half-sent header was cut before %v", originReadHeaderTimeout)
		}
		time.Sleep(2 * time.Second)
		if !closedBy(slow) {
			t.Errorf("a half-sent header still holds its connection after %v", originReadHeaderTimeout+time.Second)
		}

		idle := ln.dial()
		defer idle.Close()
		go io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" || resp.Close {
			t.Fatalf("keep-alive request: %d %q close=%v", resp.StatusCode, body, resp.Close)
		}
		time.Sleep(originIdleTimeout - time.Second)
		if closedBy(idle) {
			t.Errorf("an idle connection was closed before %v", originIdleTimeout)
		}
		time.Sleep(2 * time.Second)
		if !closedBy(idle) {
			t.Errorf("an idle connection is still open after %v", originIdleTimeout+time.Second)
		}

		if err := hs.Close(); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
}
