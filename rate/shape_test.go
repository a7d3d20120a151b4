package rate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

func TestReaderShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 100, Burst: 10}) // 100 B/s, chunks of 10
		src := bytes.Repeat([]byte("0123456789"), 100)
		start := time.Now()
		got, err := io.ReadAll(NewReader(bytes.NewReader(src), b))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("ReadAll: %v, %d bytes", err, len(got))
		}
		// The first 10 bytes come from the full bucket, the other 990
		// at 100 B/s.
		if el := time.Since(start); el != 9900*time.Millisecond {
			t.Fatalf("1000 bytes took %v, want 9.9s", el)
		}
	})
}

// A reader blocked on an idle source holds no tokens: it pays after reading.
func TestReaderIdleHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 100, Burst: 10})
		pr, pw := io.Pipe()
		done := make(chan []byte)
		go func() {
			got, _ := io.ReadAll(NewReader(pr, b))
			done <- got
		}()
		synctest.Wait()
		if tk := b.Tokens(); tk != 10 {
			t.Fatalf("tokens while the reader is idle = %v, want 10", tk)
		}
		if _, err := pw.Write([]byte("abc")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if tk := b.Tokens(); tk != 7 {
			t.Fatalf("tokens after 3 bytes = %v, want 7", tk)
		}
		pw.Close()
		if got := <-done; string(got) != "abc" {
			t.Fatalf("read %q", got)
		}
	})
}

func TestReaderContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 10, Burst: 5})
		b.AllowN(5)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		r := NewReaderContext(ctx, bytes.NewReader([]byte("0123456789")), b)
		p := make([]byte, 10)
		n, err := r.Read(p) // 5 bytes read, 500 ms to pay, ctx ends at 200 ms
		if n != 5 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read = %d, %v; want the 5 bytes with the deadline error", n, err)
		}
		if n, err := r.Read(p); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read after the deadline = %d, %v", n, err)
		}
	})
}

func TestWriterShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 100, Burst: 10})
		var dst bytes.Buffer
		src := bytes.Repeat([]byte("0123456789"), 100)
		start := time.Now()
		n, err := NewWriter(&dst, b).Write(src)
		if err != nil || n != len(src) || !bytes.Equal(dst.Bytes(), src) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if el := time.Since(start); el != 9900*time.Millisecond {
			t.Fatalf("1000 bytes took %v, want 9.9s", el)
		}
	})
}

// A chunk that cannot be paid for before the deadline fails at once: the
// writer does not sit out the timeout.
func TestWriterFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBucket(t, Config{Rate: 100, Burst: 10})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var dst bytes.Buffer
		start := time.Now()
		n, err := NewWriterContext(ctx, &dst, b).Write(make([]byte, 1000))
		// Chunks are ready at 0, 0.1, ..., 0.9 s; the one at 1 s is too late.
		if n != 100 || dst.Len() != 100 || !errors.Is(err, sluice.ErrDeadline) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if el := time.Since(start); el != 900*time.Millisecond {
			t.Fatalf("failed after %v, want 0.9s (no wait for the deadline)", el)
		}
	})
}

// shortWriter accepts at most room bytes, then fails.
type shortWriter struct{ room int }

func (w *shortWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.room)
	w.room -= n
	if n < len(p) {
		return n, io.ErrClosedPipe
	}
	return n, nil
}

func TestWriterRefundsShortWrite(t *testing.T) {
	b := mustBucket(t, Config{Rate: 1, Burst: 10})
	n, err := NewWriterContext(t.Context(), &shortWriter{room: 3}, b).Write(make([]byte, 8))
	if n != 3 || !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if tk := b.Tokens(); tk < 7 || tk > 7.01 {
		t.Fatalf("tokens = %v, want 7: the 5 unwritten bytes refunded", tk)
	}
}

func TestShapeEdges(t *testing.T) {
	zero := mustBucket(t, Config{Rate: 100, Burst: 0})
	if n, err := NewWriter(io.Discard, zero).Write([]byte("x")); n != 0 || !errors.Is(err, sluice.ErrTooLarge) {
		t.Fatalf("burst 0 writer: %d, %v", n, err)
	}
	if n, err := NewReader(bytes.NewReader([]byte("x")), zero).Read(make([]byte, 1)); n != 0 || !errors.Is(err, sluice.ErrTooLarge) {
		t.Fatalf("burst 0 reader: %d, %v", n, err)
	}
	inf := mustBucket(t, Config{Rate: Inf})
	var dst bytes.Buffer
	if n, err := NewWriter(&dst, inf).Write(make([]byte, 1<<20)); n != 1<<20 || err != nil {
		t.Fatalf("Inf writer: %d, %v", n, err)
	}
	// Rate 0: the burst is all there is; the reader gets an error, not a hang.
	once := mustBucket(t, Config{Rate: 0, Burst: 4})
	got, err := io.ReadAll(NewReader(bytes.NewReader([]byte("0123456789")), once))
	if !errors.Is(err, sluice.ErrRate) || string(got) != "01234567" {
		t.Fatalf("rate 0 reader: %q, %v", got, err)
	}
}
