package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A request with a body has its wait for the upstream's headers bounded
// by the route's timeout from its forwarding (boundHeaders), since an
// upstream that stops reading a body would otherwise hold the request for
// ever. But the time a body takes to come is mostly the client's: a
// client that uploads slowly, or breaks off, must not be taken for an
// overloaded upstream, or any client could bring down the adaptive limit
// that every client of the route shares by uploading a byte at a time
// (as deadline.go keeps a client's own deadline from doing).
//
// So the proxy watches the upload. When the timeout comes while it waits
// on the client (inside a Read of the client's body), the client is the
// slow party: the upstream request is cancelled with errUploadTimeout,
// the client is answered 408, and the outcome is Ignore. When the
// timeout comes while the proxy waits to hand the upstream what it read
// (the upstream not reading), the upstream is: 504, Dropped, as before.
// Once the client has sent the whole body the upstream gets the whole
// timeout again, from then. A body whose reading fails (the client left
// mid-upload, server.read_timeout, a malformed chunk) is the client's
// failure too: Ignore, and 408 or 400 if the client is still there.

// errUploadTimeout cancels the upstream request of a request whose client
// had not sent its whole body within the route's timeout.
var errUploadTimeout = errors.New("the client did not send its request body within the route's timeout")

// upload is the body of a request with one, as the upstream request reads
// it, and the timer that bounds the wait for the upstream's headers.
type upload struct {
	body    io.ReadCloser
	timeout time.Duration
	cancel  context.CancelCauseFunc // the upstream request's
	client  http.ResponseWriter     // its controller is made only for a slow client (expire)
	reading atomic.Bool             // in a Read of the client's body: waiting on the client

	mu        sync.Mutex
	timer     *time.Timer
	deadline  time.Time // when the timer is due; a firing before it is stale
	uploaded  bool      // the body was read to its end
	clientErr error     // why the client's upload failed; nil: it did not
	stopped   bool      // the headers came or the request ended: the timer does nothing
}

// boundHeaders bounds the wait for the upstream's headers of r, if it has
// a body, to the route's timeout (see above), cancelling the upstream
// request through cancel past it; it replaces r's body by one that
// watches the upload. The transport's ResponseHeaderTimeout starts only
// once the body is written, and an upstream that stops reading it
// (overloaded, its receive window at 0) would hold the request, its
// permits and its goroutine with nothing to end them: not even the
// client's leaving, which net/http does not see before the body is read.
// A request without a body needs none: its headers fit in the socket's
// buffer.
func (st *reqState) boundHeaders(r *http.Request, timeout time.Duration, cancel context.CancelCauseFunc) {
	if r.ContentLength == 0 {
		return
	}
	u := &upload{body: r.Body, timeout: timeout, cancel: cancel, client: st.w, deadline: time.Now().Add(timeout)}
	u.mu.Lock()
	u.timer = time.AfterFunc(timeout, u.expire)
	u.mu.Unlock()
	r.Body = u
	st.upload = u
}

// stopHeaders stops boundHeaders' timer: the headers came, or the request
// ended.
func (st *reqState) stopHeaders() {
	if u := st.upload; u != nil {
		u.mu.Lock()
		u.stopped = true
		u.timer.Stop()
		u.mu.Unlock()
	}
}

func (u *upload) Read(p []byte) (int, error) {
	u.reading.Store(true)
	n, err := u.body.Read(p)
	u.reading.Store(false)
	if err != nil {
		u.mu.Lock()
		switch {
		case u.stopped || u.uploaded || u.clientErr != nil:
		case err == io.EOF:
			// From now on only the upstream is waited on: it gets its
			// whole timeout.
			u.uploaded = true
			u.deadline = time.Now().Add(u.timeout)
			u.timer.Reset(u.timeout)
		default:
			u.clientErr = err
		}
		u.mu.Unlock()
	}
	return n, err
}

func (u *upload) Close() error { return u.body.Close() }

// expire is the timer's: the route's timeout passed.
func (u *upload) expire() {
	u.mu.Lock()
	if u.stopped || u.clientErr != nil || time.Now().Before(u.deadline) {
		// Over, or a firing that the upload's end made stale: Read
		// reset the timer while this one waited for mu.
		u.mu.Unlock()
		return
	}
	slow := !u.uploaded && u.reading.Load()
	if slow {
		u.clientErr = errUploadTimeout
	}
	u.stopped = true
	u.mu.Unlock()
	if !slow {
		u.cancel(errHeaderTimeout)
		return
	}
	// End the read the upstream request is blocked in, and any later
	// one: net/http closes the body when the handler returns, which
	// reads what is left of it (up to 256 KiB), and would wait on the
	// client before answering it. The connection is closed after the
	// answer, its body unread.
	_ = http.NewResponseController(u.client).SetReadDeadline(time.Now())
	u.cancel(errUploadTimeout)
}

// uploadFailed returns why the client's upload failed, nil if it did not
// (or the request had no body).
func (st *reqState) uploadFailed() error {
	u := st.upload
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.clientErr
}

// uploadStatus is the answer to a client whose upload failed with err:
// 408 when it was too slow, 400 when what it sent could not be read.
func uploadStatus(err error) (int, string) {
	var ne net.Error
	if errors.Is(err, errUploadTimeout) || errors.As(err, &ne) && ne.Timeout() {
		return http.StatusRequestTimeout, "request body not received in time"
	}
	return http.StatusBadRequest, "request body could not be read"
}
