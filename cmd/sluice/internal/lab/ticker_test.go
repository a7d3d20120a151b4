package lab

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestTickerCatchesUp: a tick that comes late hands out every token due
// since the last, as the seed's ticker kept its rate; a full channel still
// drops them.
func TestTickerCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := &ticker{tokens: make(chan struct{}, 20), stop: make(chan struct{})}
		ticks := make(chan time.Time)
		tk.done.Add(1)
		go func() {
			defer tk.done.Done()
			tk.feed(ticks, time.Now(), 10*time.Millisecond)
		}()
		defer tk.Close()

		time.Sleep(95 * time.Millisecond) // nine ticks due, none taken
		ticks <- time.Now()
		synctest.Wait()
		if n := len(tk.tokens); n != 9 {
			t.Fatalf("after one late tick at 95 ms: %d tokens, want 9", n)
		}
		time.Sleep(200 * time.Millisecond) // twenty more due; room for eleven
		ticks <- time.Now()
		synctest.Wait()
		if n := len(tk.tokens); n != 20 {
			t.Fatalf("at 295 ms: %d tokens, want 20 (the channel's size)", n)
		}
		for range 20 {
			<-tk.tokens
		}
		time.Sleep(10 * time.Millisecond) // 30 due at 305 ms: the rest were dropped
		ticks <- time.Now()
		synctest.Wait()
		if n := len(tk.tokens); n != 1 {
			t.Fatalf("at 305 ms: %d tokens, want 1 (ticks dropped on a full channel stay dropped)", n)
		}
	})
}
