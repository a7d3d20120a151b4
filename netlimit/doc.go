// Package netlimit limits the connections a server takes from a
// net.Listener, for servers that are not built on net/http (and for those
// that are, one level below the HTTP middleware).
//
// Wrap a listener and serve from the wrapper:
//
//	lim, _ := concurrency.New(concurrency.Config{Limit: 20, MaxQueue: 1000})
//	ln, err := netlimit.NewListener(inner, netlimit.Config{Limiter: lim})
//	for {
//		c, err := ln.Accept() // at most 20 connections open at once
//		...
//		go serve(c) // c.Close() gives the slot back; serve sets a read deadline
//	}
//
// # What happens to a connection
//
// One goroutine takes connections from the inner listener as fast as the
// kernel hands them over, so the decisions are the Listener's, not the
// kernel's backlog's. Two things hold it back: an accept rate (step 1), and
// a server slow to call Accept, since a connection admitted at once is
// handed over by that goroutine (call Accept in a loop and serve each
// connection in its own goroutine, as net/http does):
//
//  1. AcceptRate, if set, is a token bucket on connections taken from the
//     kernel. By default the loop waits for a token before deciding on the
//     connection, so the excess waits in the kernel's backlog (seed 004's
//     token bucket: 1000 connections/s offered, the bucket's rate served);
//     with RejectOverRate it answers the excess with Reject instead.
//  2. Limiter, if set, decides whether the connection is served now. A free
//     permit hands the connection to Accept at once. Otherwise the
//     connection waits in the limiter's own queue (its Acquire), so the
//     queue's length, order and wait bound are the limiter's: a
//     concurrency.Limiter's MaxQueue, its FIFO, LIFO or CoDel discipline
//     and its MaxWait all apply to connections. MaxPending caps the
//     connections waiting at once whatever the limiter.
//  3. A rejected connection is written Reject (by default a bare HTTP 429)
//     and closed, by a small fixed pool of goroutines with a deadline on
//     each answer, so a slow client never stalls the accept loop. The
//     rejecter first reads the client's request (an HTTP client takes an
//     answer that comes before its request for a broken connection; see
//     Config.ServerSpeaksFirst for protocols that want it at once), and
//     after answering waits for the client to hang up so that the answer
//     is not destroyed by a reset. When
//     the pool is busy the connection is closed with no answer at all
//     (counted by Unanswered). Nothing grows one goroutine per rejection.
//
// A rejected connection is answered or closed within RejectTimeout of its
// accept, however long it waited for a rejecter: a late answer is no
// answer. The defaults (32 rejecters, a queue of 1024, 1s) answer a burst
// of 500 rejected connections on loopback with a 429 each.
//
// The permit of an accepted connection is released, exactly once, when the
// returned connection is first closed, with sluice.Ignore: how long a
// connection stays open says nothing about the server's capacity.
//
// # The server must close silent connections
//
// An admitted connection holds its permit until the server closes it, so a
// server that waits forever for a client's request lets N silent clients
// hold a limit of N forever. An http.Server must set ReadHeaderTimeout
// (and IdleTimeout, for keep-alive connections between requests):
//
//	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
//	srv.Serve(ln)
//
// Other servers need the same: a read deadline on each connection.
//
// Stats reports the Listener's own counts in the shape of sluice.Stats
// (connections handed out as Admitted, rejections by reason, open
// connections as InFlight, waiting connections as Queued), so
// promsluice.NewCollector exports it like any limiter.
//
// Close stops the accept loop, closes every connection that was not yet
// handed out and waits for every goroutine the Listener started.
package netlimit
