package netlimit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rate"
)

// dialN opens n loopback connections to ln; they are closed when the test
// ends.
func dialN(t *testing.T, ln net.Listener, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// until polls cond until it holds; the bound is a hang detector.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(failAfter); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedByServer fails unless the server's end of c has been closed: a
// read returns EOF or a reset, not the hang detector's timeout.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(failAfter))
	_, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: read after Close = %v, want EOF or a reset", what, err)
	}
}

// TestCloseQueuedConnections is Close with real sockets in every place a
// connection can be between the kernel and the server: in the limiter's
// queue, with a rejecter, in the reject queue, admitted but not yet taken
// by Accept, waiting for an accept-rate token, and in the kernel's backlog.
// Every one is closed, every permit given back, Stats counts nothing that
// is gone, and (TestMain's goleak) no goroutine is left.
func TestCloseQueuedConnections(t *testing.T) {
	t.Run("limiter and reject queues", func(t *testing.T) {
		lim := newConcurrency(t, 1, 2)
		ln := loopback(t, Config{Limiter: lim, Rejecters: 1, RejectQueue: 2, RejectTimeout: time.Hour})
		dialN(t, ln, 1)
		served, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer served.Close()
		// 2 wait for the limiter; of 4 rejected, the silent rejecter holds
		// one and its queue two, and the last is closed unanswered.
		queued := dialN(t, ln, 2)
		until(t, "2 queued", func() bool { return ln.Stats().Queued == 2 })
		rejected := dialN(t, ln, 4)
		until(t, "4 rejected", func() bool { return ln.Stats().Rejected[sluice.ReasonQueueFull] == 4 })
		before := ln.Stats()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		for i, c := range queued {
			closedByServer(t, c, fmt.Sprint("queued client ", i))
		}
		for i, c := range rejected {
			closedByServer(t, c, fmt.Sprint("rejected client ", i))
		}
		s := ln.Stats()
		if s.Queued != 0 || s.InFlight != 1 || s.Admitted != 1 || s.Rejected != before.Rejected {
			t.Errorf("stats after Close %+v, want none queued, the served one in flight and admitted, rejections %v", s, before.Rejected)
		}
		if ls := lim.Stats(); ls.InFlight != 1 || ls.Queued != 0 {
			t.Errorf("limiter after Close %+v, want the served permit only", ls)
		}
	})
	t.Run("admitted, not accepted", func(t *testing.T) {
		lim := newConcurrency(t, 4, 0)
		ln := loopback(t, Config{Limiter: lim})
		clients := dialN(t, ln, 3) // the first waits for Accept, the rest in the backlog
		until(t, "a permit taken", func() bool { return lim.Stats().InFlight == 1 })
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		for i, c := range clients {
			closedByServer(t, c, fmt.Sprint("client ", i))
		}
		if s := ln.Stats(); s.Admitted != 0 || s.InFlight != 0 || s.RejectedTotal() != 0 {
			t.Errorf("stats after Close %+v, want nothing", s)
		}
		if ls := lim.Stats(); ls.InFlight != 0 {
			t.Errorf("limiter after Close %+v, want its permit back", ls)
		}
	})
	t.Run("waiting for a rate token", func(t *testing.T) {
		bucket, err := rate.NewBucket(rate.Config{Rate: 0.001, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		ln := loopback(t, Config{AcceptRate: bucket})
		clients := dialN(t, ln, 3)
		served, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer served.Close()
		until(t, "one waiting for a token", func() bool { return bucket.Stats().Queued == 1 })
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		for i, c := range clients[1:] {
			closedByServer(t, c, fmt.Sprint("client ", i+1))
		}
		if s := ln.Stats(); s.Admitted != 1 || s.InFlight != 1 || s.RejectedTotal() != 0 {
			t.Errorf("stats after Close %+v, want the served one only", s)
		}
	})
}
