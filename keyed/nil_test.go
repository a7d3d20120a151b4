package keyed_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/keyed"
)

// A Config.New that returns no limiter and no error is a configuration
// mistake, reported where it happens. The Map used to store the nil
// limiter and hand it out, and the next insertion whose sweep looked at it
// panicked (a nil dereference in busy, under the shard's lock, in another
// caller); a nil overflow limiter panicked at the first key past the cap.
func TestNewReturningNoLimiterIsAnError(t *testing.T) {
	newer := func(nilKey string) func(string) (sluice.Limiter, error) {
		return func(key string) (sluice.Limiter, error) {
			if key == nilKey {
				return nil, nil
			}
			return &gate{key: key, n: 1}, nil
		}
	}
	wantErr := func(t *testing.T, err error, field string) {
		t.Helper()
		if !errors.Is(err, sluice.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Fatalf("err = %v, want sluice.ErrInvalidConfig naming %s", err, field)
		}
	}

	t.Run("overflow", func(t *testing.T) {
		_, err := keyed.New(keyed.Config[sluice.Limiter]{New: newer(keyed.OverflowKey)})
		wantErr(t, err, "Config.New(OverflowKey)")
	})
	t.Run("key", func(t *testing.T) {
		t0 := time.Unix(1_000_000, 0)
		m := mustNew(t, keyed.Config[sluice.Limiter]{New: newer("nil"), MaxKeys: 1, IdleTimeout: time.Second})
		l, err := m.GetAt(t0, "nil")
		wantErr(t, err, `Config.New("nil")`)
		if l != nil {
			t.Fatalf("Get returned %v with its error", l)
		}
		if _, err := m.TryAcquire("nil"); !errors.Is(err, sluice.ErrInvalidConfig) {
			t.Fatalf("TryAcquire err = %v, want sluice.ErrInvalidConfig", err)
		}
		if st := m.Stats(); st.Keys != 0 || st.Created != 0 {
			t.Fatalf("stats = %+v: the nil limiter was stored", st)
		}
		// A stored key would now be idle, and the sweep look at it.
		if l, err := m.GetAt(t0.Add(time.Hour), "other"); err != nil || l == m.Overflow() {
			t.Fatalf("other: %v, %v; want a limiter of its own", l, err)
		}
	})
}

// A Config.New that panics (net/http recovers a handler's panic) gives
// back the MaxKeys slot it was called for: each one used to keep its slot,
// and once MaxKeys had panicked every new client went to the overflow
// limiter for good.
func TestNewPanickingKeepsNoSlot(t *testing.T) {
	panicky := true
	m := mustNew(t, keyed.Config[sluice.Limiter]{MaxKeys: 4, New: func(key string) (sluice.Limiter, error) {
		if panicky && key != keyed.OverflowKey {
			panic("boom")
		}
		return &gate{key: key, n: 1}, nil
	}})
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("key %q: New's panic did not reach the caller", key)
				}
			}()
			m.TryAcquire(key)
		}()
	}
	panicky = false
	if st := m.Stats(); st.Keys != 0 {
		t.Errorf("Stats().Keys = %d after every New panicked, want 0", st.Keys)
	}
	l, err := m.Get("fresh")
	if err != nil || l == m.Overflow() {
		t.Errorf("Get(fresh) = overflow %v, %v; want a limiter of its own", l == m.Overflow(), err)
	}
}
