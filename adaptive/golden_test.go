package adaptive

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

// recorder writes one line per sample that changed the limit.
type recorder struct {
	Algorithm
	buf bytes.Buffer
}

func (r *recorder) Observe(now time.Time, s Sample) int {
	old := r.Limit()
	l := r.Algorithm.Observe(now, s)
	if l != old {
		fmt.Fprintf(&r.buf, "t=%-8v latency=%-8v inflight=%-3d %-7v limit %d -> %d\n",
			now.Sub(epoch).Round(time.Millisecond), s.Latency.Round(time.Millisecond), s.InFlight, s.Outcome, old, l)
	}
	return l
}

// TestGolden replays one scripted run per algorithm — a service with 10
// slots and 100ms requests, twice as slow from t=20s, clients giving up
// (Dropped) after 400ms — and compares every change of the limit with
// testdata/<name>.golden. Run with -update after an intended change and
// read the diff.
func TestGolden(t *testing.T) {
	m := model{Base: 100 * time.Millisecond, Capacity: 10, Noise: 0.1, Seed: 7,
		Deadline: 400 * time.Millisecond, SlowAt: 20 * time.Second, SlowBase: 200 * time.Millisecond}
	for name, alg := range algorithms(t, 1000, 250*time.Millisecond) {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{Algorithm: alg}
			m.drive(rec, 40*time.Second)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, rec.buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update)", err)
			}
			if got := rec.buf.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("transcript differs from %s; rerun with -update and review the diff.\ngot:\n%s", path, got)
			}
		})
	}
}
