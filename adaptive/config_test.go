package adaptive

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	newAIMD := func(c AIMDConfig) error { _, err := NewAIMD(c); return err }
	newVegas := func(c VegasConfig) error { _, err := NewVegas(c); return err }
	newG2 := func(c Gradient2Config) error { _, err := NewGradient2(c); return err }
	tests := []struct {
		field string
		err   error
	}{
		{"AIMDConfig.MinLimit", newAIMD(AIMDConfig{MinLimit: 10, MaxLimit: 5})},
		{"AIMDConfig.InitialLimit", newAIMD(AIMDConfig{InitialLimit: 50, MaxLimit: 40})},
		{"AIMDConfig.InitialLimit", newAIMD(AIMDConfig{InitialLimit: -1})},
		{"AIMDConfig.MaxLimit", newAIMD(AIMDConfig{MaxLimit: -1})},
		{"AIMDConfig.Backoff", newAIMD(AIMDConfig{Backoff: 1})},
		{"AIMDConfig.Backoff", newAIMD(AIMDConfig{Backoff: -0.5})},
		{"AIMDConfig.Backoff", newAIMD(AIMDConfig{Backoff: math.NaN()})},
		{"AIMDConfig.Interval", newAIMD(AIMDConfig{Interval: -time.Second})},
		{"AIMDConfig.Timeout", newAIMD(AIMDConfig{Timeout: -time.Second})},
		{"AIMDConfig.Increase", newAIMD(AIMDConfig{Increase: -1})},
		{"VegasConfig.MinLimit", newVegas(VegasConfig{MinLimit: 20, MaxLimit: 10})},
		{"VegasConfig.Alpha", newVegas(VegasConfig{Alpha: 7})},
		{"VegasConfig.Alpha", newVegas(VegasConfig{Alpha: -1})},
		{"VegasConfig.Alpha", newVegas(VegasConfig{Alpha: 5, Beta: 4})},
		{"VegasConfig.Beta", newVegas(VegasConfig{Beta: 2})}, // below the default Alpha: the field set is the one at fault
		{"VegasConfig.Beta", newVegas(VegasConfig{Beta: math.Inf(1)})},
		{"VegasConfig.Smoothing", newVegas(VegasConfig{Smoothing: 1.5})},
		{"VegasConfig.NoLoadWindow", newVegas(VegasConfig{NoLoadWindow: -1})},
		{"VegasConfig.Backoff", newVegas(VegasConfig{Backoff: 1.1})},
		{"VegasConfig.Backoff", newVegas(VegasConfig{Backoff: -0.9})},
		{"VegasConfig.Timeout", newVegas(VegasConfig{Timeout: -time.Second})},
		{"Gradient2Config.Timeout", newG2(Gradient2Config{Timeout: -time.Second})},
		{"Gradient2Config.Tolerance", newG2(Gradient2Config{Tolerance: 0.9})},
		{"Gradient2Config.Tolerance", newG2(Gradient2Config{Tolerance: math.NaN()})},
		{"Gradient2Config.QueueSize", newG2(Gradient2Config{QueueSize: -4})},
		{"Gradient2Config.LongWindow", newG2(Gradient2Config{LongWindow: -1})},
		{"Gradient2Config.Smoothing", newG2(Gradient2Config{Smoothing: -0.2})},
		{"Gradient2Config.MaxLimit", newG2(Gradient2Config{MaxLimit: -3})},
		{"Gradient2Config.MaxLimit", newG2(Gradient2Config{MaxLimit: math.MaxInt32 + 1})},
		{"AIMDConfig.InitialLimit", newAIMD(AIMDConfig{InitialLimit: math.MaxInt, MaxLimit: math.MaxInt32})},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, sluice.ErrInvalidConfig) {
			t.Errorf("%s: error %v does not match sluice.ErrInvalidConfig", tt.field, tt.err)
			continue
		}
		if !strings.Contains(tt.err.Error(), tt.field+" ") {
			t.Errorf("error %q does not name %s", tt.err, tt.field)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	a, err := NewAIMD(AIMDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Limit() != 20 || a.increase != 1 || a.interval != time.Second || a.backoff != 0.75 || a.timeout != 0 || a.bounds != (bounds{1, 1000}) {
		t.Errorf("AIMD defaults: %+v", a)
	}
	v, err := NewVegas(VegasConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Limit() != 20 || v.alpha != 3 || v.beta != 6 || v.smoothing != 1 || v.backoff != 0.9 || v.timeout != 0 || !v.slowStart || v.noLoad.window != 30*time.Second || v.bounds != (bounds{1, 1000}) {
		t.Errorf("Vegas defaults: %+v", v)
	}
	g, err := NewGradient2(Gradient2Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Limit() != 20 || g.tolerance != 1.5 || g.queue != 4 || g.smoothing != 0.2 || g.long.n != 600 || g.timeout != 0 || g.bounds != (bounds{1, 1000}) {
		t.Errorf("Gradient2 defaults: %+v", g)
	}
	// The default initial limit bends to explicit bounds rather than fail.
	for _, c := range []struct {
		min, max, want int
	}{{50, 0, 50}, {0, 10, 10}, {5, 8, 8}} {
		a, err := NewAIMD(AIMDConfig{MinLimit: c.min, MaxLimit: c.max})
		if err != nil || a.Limit() != c.want {
			t.Errorf("MinLimit %d MaxLimit %d: limit %v, %v; want %d", c.min, c.max, a, err, c.want)
		}
	}
}

// Ignore and cancelled permits never reach an algorithm from a limiter; if one
// does, it changes nothing (a healthy-looking sample would grow the limit).
func TestIgnoredOutcomesChangeNothing(t *testing.T) {
	for name, a := range algorithms(t, 1000, 0) {
		now := epoch
		for _, o := range []sluice.Outcome{sluice.Ignore, sluice.Outcome(9)} {
			for range 100 {
				now = now.Add(time.Second)
				if l := a.Observe(now, Sample{Latency: time.Millisecond, InFlight: 20, Outcome: o}); l != 20 {
					t.Fatalf("%s: %v sample moved the limit to %d", name, o, l)
				}
			}
		}
	}
}

func TestLittleConfigErrors(t *testing.T) {
	for _, c := range []struct {
		field string
		cfg   LittleConfig
	}{
		{"Headroom", LittleConfig{Headroom: -0.1}},
		{"Headroom", LittleConfig{Headroom: 1.5}},
		{"Headroom", LittleConfig{Headroom: math.NaN()}},
		{"Backoff", LittleConfig{Backoff: 2}},
		{"Timeout", LittleConfig{Timeout: -time.Second}},
		{"MinLimit", LittleConfig{MinLimit: 10, MaxLimit: 5}},
	} {
		_, err := NewLittle(c.cfg)
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), "LittleConfig."+c.field) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig naming LittleConfig.%s", c.cfg, err, c.field)
		}
	}
}
