package waitrule

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

func TestBound(t *testing.T) {
	const now = int64(1_000_000_000)
	for _, c := range []struct {
		name      string
		deadline  int64
		maxWait   time.Duration
		wantLimit time.Duration
		wantWhy   sluice.Reason
	}{
		{"nothing", NoDeadline, 0, Unbounded, sluice.ReasonRate},
		{"max wait", NoDeadline, time.Second, time.Second, sluice.ReasonQueueTimeout},
		{"deadline first", now + int64(100*time.Millisecond), time.Second, 100*time.Millisecond - 1, sluice.ReasonDeadline},
		{"max wait first", now + int64(2*time.Second), time.Second, time.Second, sluice.ReasonQueueTimeout},
		{"deadline passed", now - 5, time.Second, 0, sluice.ReasonDeadline},
		{"deadline now", now, 0, 0, sluice.ReasonDeadline},
		{"far past", -1 << 63, 0, 0, sluice.ReasonDeadline},
	} {
		limit, why := Bound(now, c.deadline, c.maxWait)
		if limit != c.wantLimit || why != c.wantWhy {
			t.Errorf("%s: Bound = %v, %v; want %v, %v", c.name, limit, why, c.wantLimit, c.wantWhy)
		}
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Sleep = %v after %v, want nil after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("Sleep = %v after %v, want the deadline after 300ms", err, time.Since(start))
		}
		if err := Sleep(ctx, 0); err != context.DeadlineExceeded {
			t.Fatalf("Sleep(done ctx, 0) = %v", err)
		}
	})
}
