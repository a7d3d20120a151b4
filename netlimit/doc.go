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
// Call Accept in a loop and serve each connection in its own goroutine, as
// net/http does: one goroutine takes connections from the kernel and hands
// over those admitted at once, so a server slow to call Accept holds it back.
//
// # What happens to a connection
//
//  1. AcceptRate, if set, is a token bucket on connections taken from the
//     kernel. By default the excess waits in the kernel's backlog; with
//     RejectOverRate it is answered with Reject instead.
//  2. Limiter, if set, decides whether the connection is served now. A free
//     permit hands it to Accept at once; otherwise it waits in the
//     limiter's own queue, under that limiter's MaxQueue, discipline and
//     MaxWait. MaxPending (default 1024) caps the connections waiting at
//     once whatever the limiter. A waiter counts until Accept takes its
//     connection, not only until the limiter admits it: a rate.Bucket's
//     permits bound no connections, and admitted ones held for a server
//     not calling Accept would otherwise pile up unseen (Stats.Queued
//     counts them).
//  3. A rejected connection is written Reject (default a bare HTTP 503, or
//     429 for a quota's rejection: AcceptRate) and
//     closed by a small fixed pool of goroutines (Rejecters, default 32,
//     with a RejectQueue of 1024), within RejectTimeout (default 1s) of its
//     accept. The rejecter reads the client's request first (see
//     ServerSpeaksFirst for protocols that want the answer at once). When
//     the pool is busy the connection is closed with no answer, counted by
//     Unanswered.
//
// The permit of an accepted connection is released, exactly once, when the
// returned connection is first closed, with sluice.Ignore.
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
// Stats reports the Listener's own counts in the shape of sluice.Stats, so
// promsluice.NewCollector exports it like any limiter. Close stops the
// accept loop, closes every connection not yet handed out and waits for
// every goroutine the Listener started.
//
// Why the loop, the rejecters and Ignore work as they do, with the
// measurements behind the defaults, is in docs/design.md, section netlimit.
package netlimit
