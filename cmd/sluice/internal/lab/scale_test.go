package lab

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// TestScaleScalesEveryDuration: Scale multiplies every duration of a
// scenario and of each kind of policy, the algorithms' configs included,
// and divides every rate; no other number changes. The fields are found
// by reflection, so that one added to sim's or adaptive's types is
// checked too.
func TestScaleScalesEveryDuration(t *testing.T) {
	s := sim.Scenario{
		Origin: sim.Origin{Changes: make([]sim.Change, 1)},
		Load:   sim.Load{Steps: make([]sim.Step, 1)},
		Policies: []sim.Policy{sim.NonePolicy{}, sim.ConcurrencyPolicy{}, sim.AdaptivePolicy{},
			sim.TokenBucketPolicy{}, sim.TickerPolicy{}},
	}
	walk(reflect.ValueOf(&s).Elem(), "", func(path string, v reflect.Value) {
		switch v.Interface().(type) {
		case time.Duration:
			v.Set(reflect.ValueOf(time.Second))
		case float64:
			v.SetFloat(1)
		}
	})
	out := Scale(s, 0.5)
	n := 0
	walk(reflect.ValueOf(&out).Elem(), "", func(path string, v reflect.Value) {
		switch x := v.Interface().(type) {
		case time.Duration:
			n++
			if x != 500*time.Millisecond {
				t.Errorf("%s = %v after Scale(0.5) of 1s, want 500ms", path, x)
			}
		case float64:
			want := 1.0
			if lastField(path) == "Rate" {
				want = 2
			}
			if x != want {
				t.Errorf("%s = %v after Scale(0.5) of 1, want %v", path, x, want)
			}
		}
	})
	if n < 20 {
		t.Errorf("only %d durations found: the walk misses some", n)
	}
}

// walk calls f with every settable duration and float64 field under v,
// through structs, slices and the policies' interface values (replaced by
// a settable copy).
func walk(v reflect.Value, path string, f func(string, reflect.Value)) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name, f)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), f)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		walk(c, fmt.Sprintf("%s(%s)", path, c.Type().Name()), f)
		v.Set(c)
	case reflect.Int64, reflect.Float64:
		f(path, v)
	}
}

func lastField(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[i+1:]
		}
	}
	return path
}
