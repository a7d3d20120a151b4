package adaptive

import (
	"testing"
	"time"
)

// The concurrency limiter calls Observe under its lock on every release, so
// its cost is paid by every request.
func BenchmarkObserve(b *testing.B) {
	for name, alg := range map[string]func() Algorithm{
		"aimd":      func() Algorithm { a, _ := NewAIMD(AIMDConfig{}); return a },
		"vegas":     func() Algorithm { v, _ := NewVegas(VegasConfig{}); return v },
		"gradient2": func() Algorithm { g, _ := NewGradient2(Gradient2Config{}); return g },
		"little":    func() Algorithm { l, _ := NewLittle(LittleConfig{}); return l },
	} {
		b.Run("alg="+name, func(b *testing.B) {
			a := alg()
			now := epoch
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(100 * time.Microsecond)
				a.Observe(now, ok(10*time.Millisecond, a.Limit()))
			}
		})
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	for name, a := range algorithms(t, 1000, 0) {
		now := epoch
		allocs := testing.AllocsPerRun(1000, func() {
			now = now.Add(time.Millisecond)
			a.Observe(now, ok(10*time.Millisecond, a.Limit()))
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Observe", name, allocs)
		}
	}
}
