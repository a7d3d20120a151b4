package httplimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// statusWriter records the status a handler sent, for the permit's outcome.
//
// It forwards Flush, Hijack and ReadFrom, so that handlers asserting
// http.Flusher, http.Hijacker or io.ReaderFrom on it keep working, and it
// has Unwrap, so that http.ResponseController reaches every other optional
// method of the writer it wraps (deadlines, full duplex).
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are interim; the final status follows
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends the status (200 if none yet) and any buffered body.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // Flusher has no error to return
}

// Hijack hands the connection to the handler; the request's outcome is then
// Ignore, since its latency says nothing about the server's capacity.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// ReadFrom keeps the underlying writer's sendfile path for io.Copy.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{w.ResponseWriter}, r)
}

// writerOnly hides ReadFrom so io.Copy does not loop back into it.
type writerOnly struct{ io.Writer }
