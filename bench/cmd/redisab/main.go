// Command redisab compares redisstore's shared token bucket with
// github.com/go-redis/redis_rate/v10 on one redis-server that it starts on
// a free loopback port, alternating the two libraries in short time slices
// (A, B, A, B, ...) so that both see the same machine load; on a shared,
// noisy machine that is what makes the ratio meaningful. It prints one
// markdown table: decisions/s, p99, the CPU per decision and the ratio
// per case.
//
//	cd bench && go run ./cmd/redisab -slices 10 -slice 300ms
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	redisbench "github.com/sluicehq/sluice/bench/redis"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/redistest"
)

var (
	nslices = flag.Int("slices", 10, "time slices per library and case")
	slice   = flag.Duration("slice", 300*time.Millisecond, "length of one slice")
	pipes   = flag.Int("pipelines", 0, "redisstore Config.Pipelines (0: default)")
	window  = flag.Duration("window", 0, "redisstore Config.BatchWindow (0: no wait, the default)")
	only    = flag.Int("callers", 0, "run only the admitted case with this many callers")
)

var meter *redisbench.CPU

type decide func(caller int) bool // false: an error or an unexpected answer

type tally struct {
	ops, bad int64
	dur      time.Duration
	lat      []time.Duration
	cpu      redisbench.Sample
}

// runSlice runs callers goroutines calling f for d and adds to t.
func runSlice(t *tally, callers int, d time.Duration, f decide) {
	c0, err := meter.Now()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		c1, err := meter.Now()
		if err != nil {
			log.Fatal(err)
		}
		u := c1.Sub(c0)
		t.cpu.Client += u.Client
		t.cpu.Server += u.Server
		t.cpu.Script += u.Script
	}()
	var ops, bad atomic.Int64
	lat := make([][]time.Duration, callers)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				ok := f(c)
				el := time.Since(t0)
				ops.Add(1)
				if !ok {
					bad.Add(1)
				}
				if i%8 == 0 { // a sample is enough for a p99
					lat[c] = append(lat[c], el)
				}
			}
		})
	}
	wg.Wait()
	t.dur += time.Since(start)
	t.ops += ops.Load()
	t.bad += bad.Load()
	t.lat = append(t.lat, slices.Concat(lat...)...)
}

func (t *tally) rate() float64 { return float64(t.ops) / t.dur.Seconds() }

func (t *tally) p99() time.Duration {
	slices.Sort(t.lat)
	if len(t.lat) == 0 {
		return 0
	}
	return t.lat[len(t.lat)*99/100]
}

// cpuPer is the client and server CPU per decision, and the part of the
// server's that Redis counts as running the script, in µs.
func (t *tally) cpuPer() string {
	n := float64(max(t.ops, 1))
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / n }
	return fmt.Sprintf("%.1f + %.1f (%.1f)", us(t.cpu.Client), us(t.cpu.Server), us(t.cpu.Script))
}

func ab(name string, callers int, a, b decide) {
	var ta, tb tally
	for range *nslices {
		runSlice(&ta, callers, *slice, a)
		runSlice(&tb, callers, *slice, b)
	}
	fmt.Printf("| %s | %d | %.0f | %v | %s | %.0f | %v | %s | **%.2f×** | %d / %d |\n", name, callers,
		ta.rate(), ta.p99().Round(time.Microsecond/10), ta.cpuPer(),
		tb.rate(), tb.p99().Round(time.Microsecond/10), tb.cpuPer(),
		ta.rate()/tb.rate(), ta.bad, tb.bad)
}

func main() {
	flag.Parse()
	srv, err := redistest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if meter, err = redisbench.NewCPU(ctx, srv.Addr()); err != nil {
		log.Fatal(err)
	}
	defer meter.Close()
	store, err := redisstore.Open(srv.URL(), redisstore.Config{Timeout: time.Second, BreakerThreshold: 1000, Pipelines: *pipes, BatchWindow: *window})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Check(ctx); err != nil {
		log.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	rr := redis_rate.NewLimiter(rdb)

	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	open, err := redisstore.NewBuckets(store, redisstore.RateConfig{Rate: 1e7, Burst: 1e7})
	if err != nil {
		log.Fatal(err)
	}
	openLim := redis_rate.Limit{Rate: 1e7, Burst: 1e7, Period: time.Second}
	sluiceAllow := func(c int) bool { r, err := open.Allow(keys[c], 1); return err == nil && r.Allowed }
	rrAllow := func(c int) bool { r, err := rr.Allow(ctx, keys[c], openLim); return err == nil && r.Allowed == 1 }

	fmt.Println("| case | callers | sluice decisions/s | sluice p99 | sluice CPU µs/decision: client + server (script) | redis_rate decisions/s | redis_rate p99 | redis_rate CPU µs/decision | ratio | errors (sluice / redis_rate) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, callers := range []int{1, 16, 64} {
		if *only == 0 || *only == callers {
			ab("admitted, one key per caller", callers, sluiceAllow, rrAllow)
		}
	}
	if *only != 0 {
		return
	}

	// A rejected flood: one key over its limit for an hour.
	flood, err := redisstore.NewBuckets(store, redisstore.RateConfig{Rate: 1.0 / 3600, Burst: 1})
	if err != nil {
		log.Fatal(err)
	}
	floodLim := redis_rate.Limit{Rate: 1, Burst: 1, Period: time.Hour}
	flood.TryAcquire("flood-s")
	rr.Allow(ctx, "flood-r", floodLim)
	ab("rejected flood, one key", 64,
		func(int) bool { _, err := flood.TryAcquire("flood-s"); return err != nil },
		func(int) bool { r, err := rr.Allow(ctx, "flood-r", floodLim); return err == nil && r.Allowed == 0 })
}
