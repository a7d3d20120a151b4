package netlimit

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rate"
)

func TestConfigErrors(t *testing.T) {
	inner := newPipeListener(1)
	defer inner.Close()
	bucket, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		inner net.Listener
		cfg   Config
		field string
	}{
		{"nil inner", nil, Config{}, "inner"},
		{"MaxPending", inner, Config{MaxPending: -1}, "MaxPending"},
		{"RejectTimeout", inner, Config{RejectTimeout: -1}, "RejectTimeout"},
		{"Rejecters", inner, Config{Rejecters: -1}, "Rejecters"},
		{"RejectQueue", inner, Config{RejectQueue: -1}, "RejectQueue"},
		{"huge Rejecters", inner, Config{Rejecters: MaxRejecters + 1}, "Rejecters"},
		{"huge RejectQueue", inner, Config{RejectQueue: 1 << 62}, "RejectQueue"},
		{"RejectOverRate", inner, Config{RejectOverRate: true}, "RejectOverRate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := NewListener(tc.inner, tc.cfg)
			if err == nil {
				ln.Close()
				t.Fatal("no error")
			}
			var ce *sluice.ConfigError
			if !errors.Is(err, sluice.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Package != "netlimit" {
				t.Errorf("%v is not a netlimit *sluice.ConfigError", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tc.field)) {
				t.Errorf("%q does not name %s", err, tc.field)
			}
		})
	}
	ln, err := NewListener(inner, Config{AcceptRate: bucket, RejectOverRate: true})
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	ln.Close()
}

// TestBurst is the test: under a burst, at most limit + queue
// connections are ever accepted, and the rest get the Reject response at
// once, while the admitted ones are still being served.
func TestBurst(t *testing.T) {
	const limit, queue, burst = 2, 3, 20
	lim := newConcurrency(t, limit, queue)
	ln := loopback(t, Config{Limiter: lim})

	accepted := make(chan net.Conn, burst)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	replies := make(chan string, burst)
	for range burst {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("request\n")); err != nil {
			t.Fatal(err)
		}
		go func() {
			b, _ := io.ReadAll(c)
			c.Close() // as an HTTP client does after "Connection: close"
			replies <- string(b)
		}()
	}

	// The rejections arrive while no served connection has been closed:
	// they did not wait for a slot.
	for i := range burst - limit - queue {
		if got := recv(t, replies, "a rejection"); got != defaultReject {
			t.Fatalf("reply %d = %q, want the 429", i, got)
		}
	}
	var held []net.Conn
	for range limit {
		held = append(held, recv(t, accepted, "an admitted connection"))
	}
	s := ln.Stats()
	if s.Admitted != limit || s.InFlight != limit || s.Queued != queue ||
		s.Rejected[sluice.ReasonQueueFull] != burst-limit-queue || s.Limit != limit {
		t.Fatalf("stats = %+v, want %d admitted and in flight, %d queued, %d rejected (queue_full)",
			s, limit, queue, burst-limit-queue)
	}

	// Closing the served connections lets the queued ones in, and no more.
	for _, c := range held {
		c.Close()
	}
	for range queue {
		recv(t, accepted, "a queued connection").Close()
	}
	for range limit + queue {
		if got := recv(t, replies, "an EOF"); got != "" {
			t.Fatalf("an admitted connection read %q", got)
		}
	}
	if s := ln.Stats(); s.Admitted != limit+queue || s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("after draining: stats = %+v", s)
	}
	if s := lim.Stats(); s.InFlight != 0 {
		t.Fatalf("limiter still holds %d permits", s.InFlight)
	}
}

// TestHTTPClientsRead503 serves net/http behind the Listener: clients that
// have sent their request before being rejected still read the 503 (the
// rejecter half-closes and drains instead of resetting the connection). A
// full concurrency limit is the server's capacity, not the client's
// quota: 503, as httplimit answers it.
func TestHTTPClientsRead503(t *testing.T) {
	const limit, queue, clients = 1, 1, 8
	ln := loopback(t, Config{Limiter: newConcurrency(t, limit, queue)})
	release := make(chan struct{})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	codes := make(chan int, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			resp, err := hc.Get("http://" + ln.Addr().String())
			if err != nil {
				t.Error(err)
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for range clients - limit - queue {
		if code := recv(t, codes, "a 503"); code != http.StatusServiceUnavailable {
			t.Fatalf("status %d while the handler was blocked, want 503", code)
		}
	}
	close(release)
	for range limit + queue {
		if code := recv(t, codes, "a 200"); code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	wg.Wait()
	srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

// TestCloseTwiceReleasesOnce: a second Close of a connection must not give
// back a second permit, or the limit would silently grow.
func TestCloseTwiceReleasesOnce(t *testing.T) {
	lim := newConcurrency(t, 1, 0)
	ln := loopback(t, Config{Limiter: lim})
	dialed := make(chan net.Conn, 2)
	dial := func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}

	go dial()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer (<-dialed).Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err == nil {
		t.Error("second Close returned no error")
	}
	if s := lim.Stats(); s.InFlight != 0 {
		t.Fatalf("in flight after two Closes = %d, want 0", s.InFlight)
	}

	go dial()
	c2, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	defer (<-dialed).Close()
	// Had the double Close released twice, the limit of 1 would admit a
	// second permit now.
	if p, err := lim.TryAcquire(); err == nil {
		p.Cancel()
		t.Fatal("a second permit was free with one connection open at limit 1")
	}
	if s := ln.Stats(); s.InFlight != 1 || s.Admitted != 2 {
		t.Fatalf("stats = %+v, want 1 in flight, 2 admitted", s)
	}
	if nc := c2.(*Conn).NetConn(); nc.LocalAddr().String() != ln.Addr().String() {
		t.Errorf("NetConn local address %v, want %v", nc.LocalAddr(), ln.Addr())
	}
}

// readFromConn is a connection with its own ReadFrom, as a *net.TCPConn
// has for sendfile; it counts the calls.
type readFromConn struct {
	net.Conn
	calls *atomic.Int32
}

func (c readFromConn) ReadFrom(r io.Reader) (int64, error) {
	c.calls.Add(1)
	return io.Copy(c.Conn, r)
}

type readFromListener struct {
	*pipeListener
	calls atomic.Int32
}

func (l *readFromListener) Accept() (net.Conn, error) {
	c, err := l.pipeListener.Accept()
	if err != nil {
		return nil, err
	}
	return readFromConn{c, &l.calls}, nil
}

// TestConnReadFrom: a Conn copies with the accepted connection's ReadFrom
// when it has one (sendfile, for net/http), and with a plain copy when it
// has none.
func TestConnReadFrom(t *testing.T) {
	withRF := &readFromListener{pipeListener: newPipeListener(1)}
	readFromThrough(t, withRF, withRF.pipeListener)
	if n := withRF.calls.Load(); n != 1 {
		t.Errorf("the inner ReadFrom was called %d times, want once", n)
	}
	without := newPipeListener(1)
	readFromThrough(t, without, without)
}

// readFromThrough sends "file" with the ReadFrom of a Conn accepted from a
// Listener over inner (whose connections dial makes) and checks that the
// client reads it.
func readFromThrough(t *testing.T, inner net.Listener, dial *pipeListener) {
	t.Helper()
	ln, err := NewListener(inner, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client := dial.dial()
	defer client.Close()
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(client)
		read <- string(b)
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rf, ok := c.(io.ReaderFrom)
	if !ok {
		c.Close()
		t.Fatal("the Conn has no ReadFrom")
	}
	if n, err := rf.ReadFrom(bytes.NewReader([]byte("file"))); n != 4 || err != nil {
		t.Errorf("ReadFrom = %d, %v; want 4, nil", n, err)
	}
	c.Close()
	if got := recv(t, read, "the client's read"); got != "file" {
		t.Errorf("the client read %q, want %q", got, "file")
	}
}

func TestNoLimiterPassesThrough(t *testing.T) {
	ln := loopback(t, Config{})
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "hi" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func TestAcceptAfterClose(t *testing.T) {
	ln := loopback(t, Config{})
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// closeFailingListener's Close closes it and reports an error, as a
// listener whose socket close fails does.
type closeFailingListener struct{ *pipeListener }

var errClose = errors.New("close failed")

func (c closeFailingListener) Close() error {
	c.pipeListener.Close()
	return errClose
}

// TestCloseErrorOnce: Close returns the inner listener's Close error once;
// a later Close closed nothing and returns nil.
func TestCloseErrorOnce(t *testing.T) {
	ln, err := NewListener(closeFailingListener{newPipeListener(1)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); !errors.Is(err, errClose) {
		t.Fatalf("first Close: %v, want the inner error", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
}

// failingListener fails Accept with a non-closed error, then reports closed.
type failingListener struct {
	*pipeListener
	failed bool
}

var errTransient = errors.New("transient accept error")

func (f *failingListener) Accept() (net.Conn, error) {
	if !f.failed {
		f.failed = true
		return nil, errTransient
	}
	return f.pipeListener.Accept()
}

func TestInnerErrorsPassThrough(t *testing.T) {
	inner := &failingListener{pipeListener: newPipeListener(1)}
	ln, err := NewListener(inner, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); !errors.Is(err, errTransient) {
		t.Fatalf("first Accept: %v, want the inner error", err)
	}
	inner.Close() // closed under the Listener's feet
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after inner closed: %v, want net.ErrClosed", err)
	}
	ln.Close()
}

// TestBurstAnsweredWithDefaults: a burst of 500 connections on real
// loopback sockets, every one rejected (the only permit is held), gets an answer
// on every connection with the default Config: no reset, no silence. A
// rejected connection is answered within RejectTimeout of its accept or
// not at all, so the defaults must answer a burst at that pace.
func TestBurstAnsweredWithDefaults(t *testing.T) {
	const burst = 500
	lim := newConcurrency(t, 1, 0)
	held, err := lim.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(sluice.Ignore, 0)
	ln := loopback(t, Config{Limiter: lim})

	replies := make(chan string, burst)
	conns := make([]net.Conn, 0, burst)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range burst {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Every connection is in before any request is sent, as in a burst
	// of connects: the rejections outnumber the rejecters.
	for _, c := range conns {
		go func() {
			c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on a broken run, not a measure
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")); err != nil {
				replies <- "write: " + err.Error()
				return
			}
			b, err := io.ReadAll(c)
			if err != nil {
				replies <- "read: " + err.Error()
				return
			}
			c.Close()
			replies <- string(b)
		}()
	}
	answered, example := 0, ""
	for range burst {
		if r := <-replies; r == defaultReject {
			answered++
		} else {
			example = r
		}
	}
	if answered != burst {
		t.Errorf("%d of %d rejected connections read the 429; one of the others read %q", answered, burst, example)
	}
	if s := ln.Stats(); s.Rejected[sluice.ReasonLimit] != burst || ln.Unanswered() != 0 {
		t.Errorf("stats %+v, %d unanswered: want %d rejected (limit), none unanswered", s, ln.Unanswered(), burst)
	}
}
