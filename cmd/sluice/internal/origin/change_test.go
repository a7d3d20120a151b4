package origin

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// TestChangesApplyInOrder: changes at the same time apply in the order
// the file lists them, as the simulator applies them, so the last one
// wins. Each had a timer of its own whose goroutines raced for the lock.
func TestChangesApplyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []sim.Change
		for i := 1; i <= 50; i++ {
			changes = append(changes, sim.Change{At: time.Second, Workers: i})
		}
		s, err := New(Config{Origin: sim.Origin{Workers: 1,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Second}, Changes: changes}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		time.Sleep(time.Second)
		synctest.Wait()
		if w := s.Stats().Workers; w != 50 {
			t.Errorf("after 50 changes at 1s, the last to 50 workers: %d workers", w)
		}
	})
}
