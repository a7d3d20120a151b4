package concurrency

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{}, "Limit"},
		{Config{Limit: -1}, "Limit"},
		{Config{Limit: MaxLimit + 1}, "Limit"},
		{Config{Limit: 1, MaxQueue: -1}, "MaxQueue"},
		{Config{Limit: 1, MaxQueue: MaxLimit + 1}, "MaxQueue"},
		{Config{Limit: 1, MaxWait: -time.Second}, "MaxWait"},
		{Config{Limit: 1, MaxWaitServices: -1}, "MaxWaitServices"},
		{Config{Limit: 1, MaxWaitServices: math.NaN()}, "MaxWaitServices"},
		{Config{Limit: 1, MaxWaitServices: math.Inf(1)}, "MaxWaitServices"},
		{Config{Limit: 1, Discipline: 9}, "Discipline"},
		{Config{Limit: 1, CoDelTarget: -1}, "CoDelTarget"},
		{Config{Limit: 1, CoDelInterval: -1}, "CoDelInterval"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v, want sluice.ErrInvalidConfig naming %s", tt.cfg, err, tt.field)
		}
		if _, err := NewCore(tt.cfg); !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Errorf("NewCore(%+v) = %v, want sluice.ErrInvalidConfig", tt.cfg, err)
		}
	}
}

func TestDisciplineText(t *testing.T) {
	for d := FIFO; d < numDisciplines; d++ {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Discipline
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Errorf("round trip of %v: %v, %v", d, back, err)
		}
	}
	var d Discipline
	if err := d.UnmarshalText([]byte("random")); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Errorf("UnmarshalText(random) = %v, want sluice.ErrInvalidConfig", err)
	}
	if s := Discipline(9).String(); s != "discipline(9)" {
		t.Errorf("String = %q", s)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Admitted: "admitted", Queued: "queued", Rejected: "rejected", 7: "verdict(7)"} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", v, got, want)
		}
	}
}

// With Limit 0 the initial limit is the Algorithm's; when that is out of
// range, the error names the Algorithm, not a Config.Limit the caller left
// at 0.
func TestConfigAlgorithmLimitOutOfRange(t *testing.T) {
	alg, err := adaptive.NewAIMD(adaptive.AIMDConfig{InitialLimit: MaxLimit + 1, MaxLimit: 2 * MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var ce *sluice.ConfigError
	_, err = New(Config{Algorithm: alg})
	if !errors.As(err, &ce) || ce.Field != "Config.Algorithm.Limit()" {
		t.Errorf("New with an Algorithm whose Limit() is %d = %v, want a ConfigError naming Config.Algorithm.Limit()", MaxLimit+1, err)
	}
	// A Limit the caller set is still Config.Limit.
	if _, err = New(Config{Limit: MaxLimit + 1, Algorithm: alg}); !errors.As(err, &ce) || ce.Field != "Config.Limit" {
		t.Errorf("New(Limit: MaxLimit+1, Algorithm) = %v, want a ConfigError naming Config.Limit", err)
	}
}
