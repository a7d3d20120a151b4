package netlimit

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
)

// TestSeed004AcceptRate is seed 004's experiment in virtual time: 1000
// connections per second offered to a listener whose accept rate is a
// token bucket of 300 or 600 per second; the rate served must be within 1%
// of the bucket's, whether the excess waits in the backlog (the seed's
// queueing bucket) or is rejected.
//
// A rejecting bucket needs a burst above 1: with Burst 1 every token that
// is ready between two arrivals waits for the next one, and the accrual
// meanwhile is lost to the cap, so arrivals every 1 ms against tokens every
// 3.33 ms serve one per 4 ms (250/s, not 300/s). A queueing bucket loses
// nothing: the waiting connection takes the token the moment it is there.
func TestSeed004AcceptRate(t *testing.T) {
	const (
		offered  = 1000 // connections per second
		duration = 10 * time.Second
	)
	for _, bucketRate := range []float64{300, 600} {
		for _, reject := range []bool{false, true} {
			t.Run(fmt.Sprintf("rate=%v/reject=%v", bucketRate, reject), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					burst := 1
					if reject {
						burst = 5
					}
					bucket, err := rate.NewBucket(rate.Config{Rate: bucketRate, Burst: burst})
					if err != nil {
						t.Fatal(err)
					}
					n := int(offered * duration / time.Second)
					inner := newPipeListener(n)
					ln, err := NewListener(inner, Config{AcceptRate: bucket, RejectOverRate: reject})
					if err != nil {
						t.Fatal(err)
					}
					var served atomic.Int64
					go func() {
						for {
							c, err := ln.Accept()
							if err != nil {
								return
							}
							served.Add(1)
							c.Close()
						}
					}()
					for range n {
						inner.dial().Close()
						time.Sleep(time.Second / offered)
					}
					got := float64(served.Load()) / duration.Seconds()
					if d := got/bucketRate - 1; d < -0.01 || d > 0.01 {
						t.Errorf("served %.1f/s, want %v/s within 1%%", got, bucketRate)
					}
					s := ln.Stats()
					if reject {
						if want := uint64(n) - s.Admitted; s.Rejected[sluice.ReasonRate] != want {
							t.Errorf("rejected %d for rate, want the %d not served", s.Rejected[sluice.ReasonRate], want)
						}
					} else if s.RejectedTotal() != 0 {
						t.Errorf("a queueing bucket rejected %v", s.Rejected)
					}
					t.Logf("served %.1f/s of %d/s offered; rejected %d", got, offered, s.RejectedTotal())
					ln.Close()
				})
			})
		}
	}
}

// TestSlowRejectsDoNotStallAccept: clients that never read, and never send,
// occupy the rejecters until RejectTimeout; the accept loop goes on
// deciding at full speed meanwhile, and the rejections the rejecters cannot
// take are closed unanswered rather than queued without bound.
func TestSlowRejectsDoNotStallAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow = 50
		inner := newPipeListener(slow + 1)
		ln := serveOne(t, inner, Config{
			Limiter:       newConcurrency(t, 1, 0),
			Rejecters:     1,
			RejectQueue:   1,
			RejectTimeout: time.Second,
		})

		start := time.Now()
		for range slow {
			defer inner.dial().Close()
		}
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Fatalf("deciding took %v of virtual time, want none", d)
		}
		s := ln.Stats()
		if s.Rejected[sluice.ReasonLimit] != slow {
			t.Fatalf("rejected %v, want %d for limit", s.Rejected, slow)
		}
		// One rejection is with the rejecter, one waits in its queue.
		if got := ln.Unanswered(); got != slow-2 {
			t.Fatalf("unanswered = %d, want %d", got, slow-2)
		}
	})
}

// TestCloseEndsEverything: Close returns with connections waiting in the
// limiter's queue, waiting to be handed to Accept, and with the rejecters
// busy; every such connection is closed, the served one is left alone, and
// goleak (TestMain) finds no goroutine left.
func TestCloseEndsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newPipeListener(8)
		lim := newConcurrency(t, 1, 2)
		ln, err := NewListener(inner, Config{Limiter: lim, Rejecters: 1, RejectTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		served := inner.dial()
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var clients []net.Conn
		for range 4 { // 2 queue, 1 is answered slowly, 1 waits for the rejecter
			clients = append(clients, inner.dial())
		}
		synctest.Wait()
		if s := ln.Stats(); s.Queued != 2 || s.Rejected[sluice.ReasonQueueFull] != 2 {
			t.Fatalf("before Close: %+v", s)
		}
		start := time.Now()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v of virtual time", d)
		}
		for i, cl := range clients {
			if _, err := cl.Read(make([]byte, 1)); err == nil {
				t.Errorf("client %d: read succeeded after Close", i)
			}
			cl.Close()
		}
		// The served connection is the server's: still open.
		go served.Write([]byte("x"))
		if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Errorf("served connection: read %d, %v after Close", n, err)
		}
		c.Close()
		served.Close()
		if s := lim.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Errorf("limiter after Close: %+v", s)
		}
	})
}

// TestQueueTimeoutAnswered: a connection that waits in the limiter's
// queue past its MaxWait is rejected with the limiter's reason and gets
// the Reject response, after its request has been read.
func TestQueueTimeoutAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newPipeListener(2)
		lim, err := concurrency.New(concurrency.Config{Limit: 1, MaxQueue: 1, MaxWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ln := serveOne(t, inner, Config{Limiter: lim})

		start := time.Now()
		second := inner.dial()
		defer second.Close()
		go second.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		reply, err := io.ReadAll(second)
		if err != nil {
			t.Fatal(err)
		}
		if string(reply) != defaultReject {
			t.Fatalf("reply %q, want the 429", reply)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("rejected after %v, want MaxWait (100ms)", d)
		}
		if s := ln.Stats(); s.Rejected[sluice.ReasonQueueTimeout] != 1 || s.Queued != 0 {
			t.Errorf("stats %+v, want one queue_timeout rejection", s)
		}
	})
}

// TestMaxPendingBoundsWaiters: with a limiter whose waits are bounded by
// time, not count (a rate.Bucket waits as long as the context allows),
// MaxPending is what bounds the connections, and goroutines, waiting.
func TestMaxPendingBoundsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newPipeListener(8)
		bucket, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := NewListener(inner, Config{Limiter: bucket, MaxPending: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var clients []net.Conn
		for range 5 {
			clients = append(clients, inner.dial())
		}
		defer func() {
			for _, c := range clients {
				c.Close()
			}
		}()
		c, err := ln.Accept() // the bucket's one token
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		synctest.Wait()
		if s := ln.Stats(); s.Queued != 2 || s.Rejected[sluice.ReasonQueueFull] != 2 {
			t.Fatalf("stats %+v, want 2 waiting and 2 rejected queue_full", s)
		}
		// The waiters get the next tokens, one a second.
		for i := range 2 {
			start := time.Now()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if d := time.Since(start); d != time.Second {
				t.Errorf("waiter %d admitted after %v, want 1s", i, d)
			}
		}
	})
}

// TestRejectResponses: a custom response, written at once when the server
// speaks first; an empty one, which just closes the connection.
func TestRejectResponses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		reject      []byte
		serverFirst bool
		want        string
	}{
		{"custom, server speaks first", []byte("421 busy\r\n"), true, "421 busy\r\n"},
		{"empty", []byte{}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := newPipeListener(2)
				serveOne(t, inner, Config{
					Limiter:           newConcurrency(t, 1, 0),
					Reject:            tc.reject,
					ServerSpeaksFirst: tc.serverFirst,
				})

				start := time.Now()
				second := inner.dial() // sends nothing
				defer second.Close()
				reply, err := io.ReadAll(second)
				if err != nil {
					t.Fatal(err)
				}
				if string(reply) != tc.want {
					t.Errorf("reply %q, want %q", reply, tc.want)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("answered after %v, want at once", d)
				}
			})
		})
	}
}

// TestRejectDeadlineFromAccept: a rejected connection is closed within
// RejectTimeout of its accept, however long it waited for a rejecter.
// Three silent clients (they never send their request) and one rejecter:
// the first holds the rejecter for the whole RejectTimeout, and the other
// two, whose time has run out meanwhile, are closed at once after it, not
// one RejectTimeout each later.
func TestRejectDeadlineFromAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newPipeListener(3)
		ln := serveOne(t, inner, Config{
			Limiter:       newConcurrency(t, 1, 0),
			Rejecters:     1,
			RejectTimeout: time.Second,
		})
		start := time.Now()
		closed := make(chan time.Duration, 3)
		for range 3 {
			c := inner.dial()
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c) // until the rejecter closes its end
				closed <- time.Since(start)
			}()
		}
		for i := range 3 {
			if d := <-closed; d != time.Second {
				t.Errorf("connection %d closed %v after its accept, want RejectTimeout (1s)", i, d)
			}
		}
		if got := ln.Unanswered(); got != 2 {
			t.Errorf("unanswered = %d, want the 2 picked up after their deadline", got)
		}
	})
}

// TestMaxPendingBoundsUnaccepted: MaxPending also bounds the connections a
// waiter was admitted for and holds until Accept takes them. With a rate
// limiter, whose permits do not bound what is open, and a server that does
// not call Accept (a pool of workers, all busy), waiters used to hand their
// connection to a goroutine blocked on Accept and make room for the next:
// every connection the bucket admitted stayed open, each in a goroutine of
// its own, and Stats showed none of them.
func TestMaxPendingBoundsUnaccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxPending, conns = 2, 100
		inner := newPipeListener(conns)
		bucket, err := rate.NewBucket(rate.Config{Rate: 100, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := bucket.TryAcquire(); err != nil { // the first connections wait for a token
			t.Fatal(err)
		} else {
			p.Release(sluice.Ignore, 0)
		}
		ln, err := NewListener(inner, Config{Limiter: bucket, MaxPending: maxPending})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		for range conns { // one every token interval; nobody calls Accept
			defer inner.dial().Close()
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		// Admitted and not taken by Accept: MaxPending waiters' and the
		// one the accept loop is handing over itself.
		held := bucket.Stats().Admitted - 1
		s := ln.Stats()
		if held > maxPending+1 || s.Queued > maxPending {
			t.Fatalf("%d connections admitted and held for Accept, Stats.Queued %d; want at most MaxPending+1 (%d), MaxPending queued",
				held, s.Queued, maxPending+1)
		}
		if got := s.RejectedTotal() + held + uint64(len(inner.conns)); got != conns {
			t.Errorf("%v rejected, %d held, %d in the backlog: %d, want the %d dialed", s.Rejected, held, len(inner.conns), got, conns)
		}
		for range held {
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
	})
}
