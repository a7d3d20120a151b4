package rate

import (
	"context"
	"io"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/gcra"
	"github.com/sluicehq/sluice/internal/waitrule"
)

// Reader shapes the bytes read through it to the rate of a Bucket, one
// token per byte. Make one with NewReader or NewReaderContext.
type Reader struct {
	ctx context.Context
	r   io.Reader
	b   *Bucket
}

// NewReader returns a Reader that reads from r no faster than b's rate in
// bytes per second. Share b between readers to shape their total.
func NewReader(r io.Reader, b *Bucket) *Reader {
	return NewReaderContext(context.Background(), r, b)
}

// NewReaderContext is NewReader whose waits end when ctx is done.
func NewReaderContext(ctx context.Context, r io.Reader, b *Bucket) *Reader {
	return &Reader{ctx: ctx, r: r, b: b}
}

// Read reads at most burst bytes from the underlying reader, then waits
// until the bucket has paid for the bytes it got. Paying after the read
// means that a reader blocked on an idle source holds no tokens that other
// users of a shared bucket could use. If ctx is done while waiting, Read
// returns the bytes together with ctx.Err(); they stay paid for.
//
// A bucket that never refills (rate 0) is different: bytes read could
// never be paid for once its tokens are gone, so Read reads at most the
// tokens left, takes them before reading (readers sharing the bucket then
// never get more than it holds between them) and gives back those of
// bytes the source did not return. With none left it fails with
// sluice.ReasonRate, reading nothing.
func (r *Reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	for {
		c, refills, err := chunk(r.b, len(p))
		if err != nil {
			return 0, err
		}
		if refills || c == 0 {
			n, rerr := r.r.Read(p[:c])
			if n > 0 {
				if werr := r.b.pay(r.ctx, n); werr != nil && rerr == nil {
					rerr = werr
				}
			}
			return n, rerr
		}
		if g := r.b.takeNanos(live, c, 0, noDeadline, sluice.ReasonRate, true); !g.ok {
			continue // another user took them meanwhile: look again
		}
		n, rerr := r.r.Read(p[:c])
		r.b.give(c - max(n, 0))
		return n, rerr
	}
}

// Writer shapes the bytes written through it to the rate of a Bucket, one
// token per byte. Make one with NewWriter or NewWriterContext.
type Writer struct {
	ctx context.Context
	w   io.Writer
	b   *Bucket
}

// NewWriter returns a Writer that writes to w no faster than b's rate in
// bytes per second, in chunks of at most b's burst.
func NewWriter(w io.Writer, b *Bucket) *Writer {
	return NewWriterContext(context.Background(), w, b)
}

// NewWriterContext is NewWriter whose waits obey ctx, as WaitN does: a
// chunk whose tokens would come after ctx's deadline (or the bucket's
// MaxWait) fails at once.
func NewWriterContext(ctx context.Context, w io.Writer, b *Bucket) *Writer {
	return &Writer{ctx: ctx, w: w, b: b}
}

// Write waits for the tokens of each chunk of at most burst bytes, then
// writes it. It returns the bytes written and the first error: a rejection
// or ctx.Err() from waiting (that chunk is not written), or the underlying
// writer's error (the tokens of the bytes it did not write are given back).
// With a bucket that never refills (rate 0) a chunk is at most the tokens
// left, so the last of them are written too before Write fails with
// sluice.ReasonRate.
func (w *Writer) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		c, _, err := chunk(w.b, len(p)-written)
		if err != nil {
			return written, err
		}
		taken, err := w.b.wait(w.ctx, c)
		if err != nil {
			return written, err
		}
		n, err := w.w.Write(p[written : written+c])
		written += n
		if n < c {
			w.b.give(min(taken, c-max(n, 0)))
			if err == nil {
				err = io.ErrShortWrite
			}
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// chunk is how many of want bytes to move at once: at most what can ever
// be paid for at once, the burst, and in a bucket that never refills (rate
// 0) the tokens left, which are all that will ever come (refills false).
// It fails when that is nothing and want is not.
func chunk(b *Bucket, want int) (c int, refills bool, err error) {
	s, w := b.load()
	limit, refills := s.burst, s.Mode != gcra.Zero
	if !refills {
		limit = min(limit, w) // the word is the tokens left
	}
	if s.Mode == gcra.Inf || int64(want) <= limit {
		return want, refills, nil
	}
	if limit <= 0 {
		why := sluice.ReasonRate // the tokens never come
		if s.burst == 0 {
			why = sluice.ReasonTooLarge // nothing fits
		}
		b.c.Reject(why)
		return 0, refills, sluice.RejectQuota(why, 0)
	}
	return int(limit), refills, nil
}

// pay takes n tokens for bytes already moved: it waits however long that
// takes (the bytes are gone, failing would not help), until ctx is done.
func (b *Bucket) pay(ctx context.Context, n int) error {
	g := b.takeNanos(live, n, waitrule.Unbounded, noDeadline, sluice.ReasonRate, true)
	if !g.ok {
		return sluice.RejectQuota(g.reason, 0)
	}
	if g.wait <= 0 {
		return nil
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	return waitrule.Sleep(ctx, g.wait)
}
