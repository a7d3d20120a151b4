package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Shutdown under load: every request that reached the upstream gets its
// whole answer; the proxy says it is not ready while it drains.
func TestShutdownDrainsUnderLoad(t *testing.T) {
	var entered, answered atomic.Int64
	inFlight := make(chan struct{}, 1000)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		select {
		case inFlight <- struct{}{}:
		default:
		}
		time.Sleep(50 * time.Millisecond) // a real request takes time
		io.WriteString(w, "done")
	})
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, `
drain_timeout: 20s
routes:
  - name: api
    upstream: UPSTREAM
    policy: c
policies:
  - name: c
    concurrency: {limit: 64, max_queue: 64, max_wait: 10s}
`, up)
	s, err := New(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, aln := listen(t), listen(t)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, aln) }()
	url := "http://" + ln.Addr().String()

	c := client(t)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var incomplete atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000 && !stop.Load(); i++ {
				resp, err := c.Get(url)
				if err != nil {
					continue // refused after the listener closed: never admitted
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "done" {
					incomplete.Add(1)
					continue
				}
				answered.Add(1)
			}
		}()
	}
	for range 32 {
		<-inFlight // requests are in flight
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// While draining, /readyz says so.
	ready := 200
	waitFor(5*time.Second, func() bool {
		resp, err := http.Get("http://" + aln.Addr().String() + "/readyz")
		if err != nil {
			return true // closed: Shutdown is past draining
		}
		resp.Body.Close()
		ready = resp.StatusCode
		return ready != 200
	})
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	stop.Store(true)
	wg.Wait()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if ready == 200 {
		t.Errorf("/readyz stayed 200 while draining")
	}
	if incomplete.Load() != 0 || answered.Load() != entered.Load() {
		t.Errorf("the upstream took %d requests, clients got %d whole answers and %d cut ones: admitted requests lost",
			entered.Load(), answered.Load(), incomplete.Load())
	}
	t.Logf("%d requests answered, drained cleanly", answered.Load())
}
