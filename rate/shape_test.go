package rate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
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
	if !errors.Is(err, sluice.ErrRate) || string(got) != "0123" {
		t.Fatalf("rate 0 reader: %q, %v", got, err)
	}
}

// endless is a source that always fills the buffer.
type endless struct{ read int }

func (e *endless) Read(p []byte) (int, error) {
	e.read += len(p)
	return len(p), nil
}

// A bucket that never refills delivers its burst in bytes, in total, and
// then nothing: neither a Reader, which pays after reading, nor a Writer,
// which pays before, moves a byte it cannot pay for, and neither strands
// the last tokens. (The Reader read a whole chunk and failed to pay only
// afterwards: three reads of a Rate 0, Burst 10 bucket delivered 30 bytes.)
func TestRateZeroDeliversTheBurst(t *testing.T) {
	b := mustBucket(t, Config{Rate: 0, Burst: 10})
	src := &endless{}
	r := NewReader(src, b)
	buf := make([]byte, 4)
	total := 0
	for range 5 {
		n, err := r.Read(buf)
		total += n
		if total > 10 || (err != nil && !errors.Is(err, sluice.ErrRate)) {
			t.Fatalf("Read = %d, %v after %d bytes in all", n, err, total)
		}
	}
	if total != 10 || src.read != 10 {
		t.Errorf("Rate 0 Burst 10: read %d bytes, delivered %d; want 10 and 10", src.read, total)
	}

	// A source that returns less than asked: the tokens of the bytes it
	// did not return come back, for the next reader of the bucket.
	b = mustBucket(t, Config{Rate: 0, Burst: 10})
	short := NewReader(iotest.HalfReader(&endless{}), b)
	n, err := short.Read(make([]byte, 8)) // 8 tokens taken, 4 bytes read
	if n != 4 || err != nil || b.Tokens() != 6 {
		t.Fatalf("half reader: Read = %d, %v with %v tokens left; want 4, nil, 6", n, err, b.Tokens())
	}
	if n, err := io.ReadFull(NewReader(&endless{}, b), make([]byte, 20)); n != 6 || !errors.Is(err, sluice.ErrRate) {
		t.Fatalf("second reader: %d, %v; want the 6 bytes left, then sluice.ErrRate", n, err)
	}

	// Readers racing on one bucket get its burst between them, exactly.
	b = mustBucket(t, Config{Rate: 0, Burst: 1000})
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, _ := io.Copy(io.Discard, NewReader(iotest.OneByteReader(&endless{}), b))
			delivered.Add(n)
		})
	}
	wg.Wait()
	if got := delivered.Load(); got != 1000 {
		t.Errorf("8 readers of a Rate 0 Burst 1000 bucket delivered %d bytes, want 1000", got)
	}

	b = mustBucket(t, Config{Rate: 0, Burst: 10})
	var dst bytes.Buffer
	w := NewWriter(&dst, b)
	for range 3 {
		if _, err := w.Write([]byte("abc")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := w.Write([]byte("abc")); n != 1 || !errors.Is(err, sluice.ErrRate) || dst.String() != "abcabcabca" {
		t.Fatalf("4th Write = %d, %v, wrote %q; want the last token's byte, then sluice.ErrRate", n, err, dst.String())
	}
}
