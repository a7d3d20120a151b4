package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/keyed"
)

func mustNew[L sluice.Limiter](t testing.TB, cfg keyed.Config[L]) *keyed.Map[L] {
	t.Helper()
	m, err := keyed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustGet[L sluice.Limiter](t testing.TB, m *keyed.Map[L], key string) L {
	t.Helper()
	l, err := m.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConfigErrors(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		cfg   keyed.Config[*gate]
		field string
		is    error
	}{
		{"no New", keyed.Config[*gate]{}, "New", sluice.ErrInvalidConfig},
		{"negative MaxKeys", keyed.Config[*gate]{New: newGate(1), MaxKeys: -1}, "MaxKeys", sluice.ErrInvalidConfig},
		{"huge MaxKeys", keyed.Config[*gate]{New: newGate(1), MaxKeys: 1 << 31}, "MaxKeys", sluice.ErrInvalidConfig},
		{"negative IdleTimeout", keyed.Config[*gate]{New: newGate(1), IdleTimeout: -time.Second}, "IdleTimeout", sluice.ErrInvalidConfig},
		{"New fails for the overflow key", keyed.Config[*gate]{New: func(string) (*gate, error) { return nil, errBoom }}, "OverflowKey", errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keyed.New(tc.cfg)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want errors.Is %v", err, tc.is)
			}
			if !contains(err.Error(), tc.field) {
				t.Errorf("err = %q does not name %s", err, tc.field)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDefaults(t *testing.T) {
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1)})
	if got := m.Stats().MaxKeys; got != 1<<16 {
		t.Errorf("MaxKeys = %d, want %d", got, 1<<16)
	}
	if got := m.Overflow().key; got != keyed.OverflowKey {
		t.Errorf("overflow limiter built for key %q, want OverflowKey", got)
	}
}

func TestOneLimiterPerKey(t *testing.T) {
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 100})
	a, b := mustGet(t, m, "a"), mustGet(t, m, "b")
	if a == b || a.key != "a" || b.key != "b" {
		t.Fatalf("a, b = %q, %q: want two limiters made for their keys", a.key, b.key)
	}
	if again := mustGet(t, m, "a"); again != a {
		t.Fatal("second Get(a) made a new limiter")
	}
	if st := m.Stats(); st.Keys != 2 || st.Created != 2 {
		t.Fatalf("stats = %+v, want 2 keys created", st)
	}
}

func TestNewErrorIsReturnedAndNothingStored(t *testing.T) {
	errBoom := errors.New("boom")
	m := mustNew(t, keyed.Config[*gate]{New: func(key string) (*gate, error) {
		if key == "bad" {
			return nil, errBoom
		}
		return &gate{key: key, n: 1}, nil
	}})
	if _, err := m.Get("bad"); !errors.Is(err, errBoom) {
		t.Fatalf("Get(bad) err = %v, want boom", err)
	}
	if _, err := m.TryAcquire("bad"); !errors.Is(err, errBoom) {
		t.Fatalf("TryAcquire(bad) err = %v, want boom", err)
	}
	if st := m.Stats(); st.Keys != 0 {
		t.Fatalf("Keys = %d after failed New, want 0", st.Keys)
	}
}

// Live keys are never evicted to make room: the key past the cap shares the
// overflow limiter, and the legitimate keys keep their state.
func TestCapOverflowsNewKeys(t *testing.T) {
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 3, IdleTimeout: time.Hour})
	var first []*gate
	for _, k := range []string{"a", "b", "c"} {
		first = append(first, mustGet(t, m, k))
	}
	for i := range 10 {
		if got := mustGet(t, m, "x"+strconv.Itoa(i)); got != m.Overflow() {
			t.Fatalf("key %d past the cap got %q, want the overflow limiter", i, got.key)
		}
	}
	for i, k := range []string{"a", "b", "c"} {
		if mustGet(t, m, k) != first[i] {
			t.Fatalf("key %s lost its limiter to the flood", k)
		}
	}
	st := m.Stats()
	if st.Keys != 3 || st.Overflowed != 10 || st.Evicted != 0 {
		t.Fatalf("stats = %+v, want 3 keys, 10 overflowed, 0 evicted", st)
	}
}

func TestIdleEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 2, IdleTimeout: time.Minute})
		a := mustGet(t, m, "a")
		mustGet(t, m, "b")

		time.Sleep(30 * time.Second)
		mustGet(t, m, "a") // a is used again; b is not
		time.Sleep(29 * time.Second)
		if got := mustGet(t, m, "c"); got != m.Overflow() {
			t.Fatal("c got a limiter of its own while no key had been idle for IdleTimeout")
		}

		time.Sleep(time.Second) // b now idle for exactly IdleTimeout, a for 30s
		c := mustGet(t, m, "c")
		if c == m.Overflow() || c.key != "c" {
			t.Fatal("c overflowed although b was idle")
		}
		if mustGet(t, m, "a") != a {
			t.Fatal("a was evicted although it was used 30s ago")
		}
		st := m.Stats()
		if st.Keys != 2 || st.Evicted != 1 || st.Overflowed != 1 {
			t.Fatalf("stats = %+v, want 2 keys, 1 evicted, 1 overflowed", st)
		}
		if b := mustGet(t, m, "b"); b != m.Overflow() {
			t.Fatal("evicted b came back with a slot although the Map is full of recent keys")
		}
	})
}

// A key holding a permit is in use however long ago it was looked up: evicting
// it would let a fresh limiter admit on top of the work still running.
func TestBusyKeyIsNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 1, IdleTimeout: time.Second})
		p, err := m.TryAcquire("a")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if mustGet(t, m, "b") != m.Overflow() {
			t.Fatal("a was evicted while it held a permit")
		}
		p.Release(sluice.Success, time.Hour)
		if got := mustGet(t, m, "b"); got.key != "b" {
			t.Fatal("b overflowed after a's permit was released")
		}
	})
}

func TestGetDoesNotAllocate(t *testing.T) {
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1)})
	mustGet(t, m, "10.0.0.1")
	if n := testing.AllocsPerRun(1000, func() { _, _ = m.Get("10.0.0.1") }); n != 0 {
		t.Errorf("Get of a live key allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := m.TryAcquire("10.0.0.1")
		p.Release(sluice.Success, 0)
	}); n != 0 {
		t.Errorf("TryAcquire+Release allocates %v times", n)
	}
}

func TestAcquireCountsAndFor(t *testing.T) {
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: 10})
	p, err := m.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire("a"); !errors.Is(err, sluice.ErrLimit) {
		t.Fatalf("second permit on a: err = %v, want ErrLimit", err)
	}
	a := m.For("a")
	if st := a.Stats(); st.InFlight != 1 {
		t.Fatalf("For(a).Stats().InFlight = %d, want 1", st.InFlight)
	}
	if _, err := a.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
		t.Fatalf("For(a).TryAcquire err = %v, want ErrLimit", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.For("b").Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire err = %v", err)
	}
	p.Release(sluice.Success, 0)
	if _, err := m.For("a").Acquire(context.Background()); err != nil {
		t.Fatalf("a after release: %v", err)
	}
	st := m.Stats()
	if st.Admitted != 2 || st.Rejected[sluice.ReasonLimit] != 2 || st.RejectedTotal() != 2 {
		t.Fatalf("stats = %+v, want 2 admitted, 2 rejected (limit); a cancel is no rejection", st)
	}
}

// Stress the shards' locks, the sweep and the counters from many goroutines
// under -race, with an IdleTimeout so short that keys churn all the time.
func TestConcurrentChurn(t *testing.T) {
	const maxKeys = 1000
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1 << 30), MaxKeys: maxKeys, IdleTimeout: time.Nanosecond})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 5000 {
				key := strconv.Itoa((g*7919 + i*31) % 20000)
				p, err := m.TryAcquire(key)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					runtime.Gosched()
				}
				p.Release(sluice.Success, 0)
				if st := m.Stats(); st.Keys > maxKeys {
					t.Errorf("%d live keys, cap %d", st.Keys, maxKeys)
					return
				}
			}
		})
	}
	wg.Wait()
	st := m.Stats()
	if st.Admitted != 16*5000 {
		t.Errorf("admitted %d, want %d", st.Admitted, 16*5000)
	}
	if int64(st.Created)-int64(st.Evicted) != int64(st.Keys) {
		t.Errorf("created %d - evicted %d != live %d", st.Created, st.Evicted, st.Keys)
	}
	if st.Evicted == 0 {
		t.Error("no evictions with a 1ns IdleTimeout")
	}
}

// A flood of a million distinct keys (100,000, ten times the cap, with
// -short or -race) never holds more than MaxKeys, and the heap it leaves
// behind is bounded by the cap, not by the flood.
func TestFloodOfDistinctKeysStaysBounded(t *testing.T) {
	flood := 1_000_000
	if testing.Short() || raceOn {
		flood = 100_000
	}
	const maxKeys = 10_000
	for _, idle := range []time.Duration{time.Hour, time.Millisecond} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			before := heapAfterGC()
			m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: maxKeys, IdleTimeout: idle})
			start := time.Now()
			buf := make([]byte, 0, 32)
			for i := range flood {
				buf = strconv.AppendInt(append(buf[:0], "client-"...), int64(i), 10)
				// Virtual time, 10µs a request: with the short idle
				// timeout, keys churn through eviction.
				if _, err := m.GetAt(start.Add(time.Duration(i)*10*time.Microsecond), string(buf)); err != nil {
					t.Fatal(err)
				}
				if i%50_000 == 0 && m.Stats().Keys > maxKeys {
					t.Fatalf("%d live keys after %d distinct keys, cap %d", m.Stats().Keys, i, maxKeys)
				}
			}
			st := m.Stats()
			if st.Keys > maxKeys {
				t.Fatalf("%d live keys, cap %d", st.Keys, maxKeys)
			}
			if st.Created+st.Overflowed != uint64(flood) {
				t.Fatalf("created %d + overflowed %d != %d lookups", st.Created, st.Overflowed, flood)
			}
			grown := heapAfterGC() - before
			// About 84 B a key measured (a 24-byte slot and a 32-byte
			// gate); the bound leaves room for noise, and does not
			// scale with the flood.
			if limit := int64(maxKeys) * 256; grown > limit {
				t.Fatalf("heap grew %d bytes for %d keys of cap %d, want <= %d", grown, flood, maxKeys, limit)
			}
			t.Logf("%d distinct keys: %d live, %d created, %d evicted, %d overflowed, heap +%d B",
				flood, st.Keys, st.Created, st.Evicted, st.Overflowed, grown)
			runtime.KeepAlive(m)
		})
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// The cap counts keys over all shards: a Map sized for exactly the keys it
// gets overflows none of them, however unevenly they hash.
func TestCapIsExactAcrossShards(t *testing.T) {
	const n = 20_000
	m := mustNew(t, keyed.Config[*gate]{New: newGate(1), MaxKeys: n, IdleTimeout: time.Hour})
	for _, k := range keys(n) {
		if mustGet(t, m, k) == m.Overflow() {
			t.Fatalf("key %s overflowed with %d of %d keys live", k, m.Stats().Keys, n)
		}
	}
	if mustGet(t, m, "one more") != m.Overflow() {
		t.Fatal("key MaxKeys+1 did not overflow")
	}
	if st := m.Stats(); st.Keys != n || st.Overflowed != 1 {
		t.Fatalf("stats = %+v, want %d keys, 1 overflowed", st, n)
	}
}
