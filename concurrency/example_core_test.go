package concurrency_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
)

// A Core runs in virtual time: the caller passes now and plays the waiters.
// Here one permit, a CoDel queue, and three callers arriving together.
func ExampleCore() {
	c, err := concurrency.NewCore(concurrency.Config{Limit: 1, MaxQueue: 10, Discipline: concurrency.CoDel})
	if err != nil {
		panic(err)
	}
	t0 := time.Unix(0, 0)
	first, _ := c.Arrive(t0, time.Time{})
	second, _ := c.Arrive(t0, time.Time{})
	third, _ := c.Arrive(t0, time.Time{})
	fmt.Println("first admitted:", first.Verdict == concurrency.Admitted)
	fmt.Println("second and third queued for at most", second.ExpiresIn, third.ExpiresIn)

	// The first request takes 30 ms; its release grants the second.
	for _, e := range c.Release(t0.Add(30*time.Millisecond), first.Token, sluice.Success, 30*time.Millisecond) {
		fmt.Println("at 30ms: second admitted:", e.Waiter == second.Waiter && e.Admitted)
	}
	// The queue has not been empty since t0: at t0+100ms it is a standing
	// queue and the third caller, which has waited more than 5 ms, is shed.
	next, _ := c.NextExpiry()
	fmt.Println("next expiry:", next.Sub(t0))
	for _, e := range c.Expire(next) {
		fmt.Println("at 100ms: third", e.Reason)
	}
	// Output:
	// first admitted: true
	// second and third queued for at most 100ms 100ms
	// at 30ms: second admitted: true
	// next expiry: 100ms
	// at 100ms: third shed
}

// A simulated caller that gives up leaves the queue at once; a grown limit
// admits waiters at once.
func ExampleCore_Remove() {
	c, _ := concurrency.NewCore(concurrency.Config{Limit: 1, MaxQueue: 1})
	t0 := time.Unix(0, 0)
	c.Arrive(t0, time.Time{})
	a, _ := c.Arrive(t0, time.Time{})
	b, _ := c.Arrive(t0, time.Time{})
	fmt.Println("b:", b.Reason)
	fmt.Println("a removed:", c.Remove(a.Waiter))
	b, _ = c.Arrive(t0, time.Time{})
	evs := c.SetLimit(t0, 2)
	fmt.Println("b admitted by SetLimit:", len(evs) == 1 && evs[0].Waiter == b.Waiter && evs[0].Admitted)
	// Output:
	// b: queue_full
	// a removed: true
	// b admitted by SetLimit: true
}

func ExampleParseDiscipline() {
	d, err := concurrency.ParseDiscipline("adaptive_lifo")
	fmt.Println(d == concurrency.AdaptiveLIFO, err)
	_, err = concurrency.ParseDiscipline("random")
	fmt.Println(err)
	// Output:
	// true <nil>
	// sluice/concurrency: Discipline = "random": must be fifo, lifo, codel or adaptive_lifo
}

// TryArrive never queues and never jumps the queue.
func ExampleCore_TryArrive() {
	c, _ := concurrency.NewCore(concurrency.Config{Limit: 1, MaxQueue: 1})
	a := c.TryArrive()
	fmt.Println(a.Verdict)
	fmt.Println(c.TryArrive().Reason)
	// Output:
	// admitted
	// limit
}

// A Discipline reads from JSON, YAML or a flag by its name.
func ExampleDiscipline_UnmarshalText() {
	var cfg struct{ Discipline concurrency.Discipline }
	err := json.Unmarshal([]byte(`{"Discipline": "codel"}`), &cfg)
	fmt.Println(cfg.Discipline == concurrency.CoDel, err)
	// Output: true <nil>
}
