package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const lifeA = `
reload: {poll: 0s}
routes:
  - name: NAME
    upstream: UPSTREAM
policies:
  - name: p
    concurrency: {limit: 10}
`

// A reload that comes after Shutdown (a SIGHUP or the file watch racing
// it) builds nothing: Shutdown closed the stores and policies it would
// reuse, and would not close what it made.
func TestReloadAfterShutdownRefused(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, replaceName(lifeA, "a"), up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, p.path, replaceName(lifeA, "b"), up)
	if err := p.s.Reload(); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("Reload after Shutdown: %v, want ErrShuttingDown", err)
	}
	if got := p.s.Config().Routes[0].Name; got != "a" {
		t.Errorf("serving route %q after a reload past Shutdown, want the old %q", got, "a")
	}
}

// Reloads racing Shutdown: none succeeds once Shutdown has returned.
func TestReloadRacingShutdown(t *testing.T) {
	up := upstream(t, echo("a"))
	p := start(t, replaceName(lifeA, "a"), up)
	writeConfig(t, p.path, replaceName(lifeA, "b"), up)
	var (
		done      atomic.Bool
		afterDone atomic.Int64
		wg        sync.WaitGroup
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000; i++ { // bounded; ends soon after Shutdown
				wasDone := done.Load()
				if err := p.s.Reload(); err == nil && wasDone {
					afterDone.Add(1)
				}
				if wasDone {
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.s.Shutdown(ctx)
	done.Store(true)
	wg.Wait()
	if n := afterDone.Load(); n != 0 {
		t.Errorf("%d reloads succeeded after Shutdown returned", n)
	}
}

func replaceName(text, name string) string {
	return strings.ReplaceAll(text, "NAME", name)
}
