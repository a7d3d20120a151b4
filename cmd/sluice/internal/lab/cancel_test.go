package lab

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// TestRealStopsOnCancel: Ctrl-C (a cancelled context) stops a real run at
// once, with every server closed and its port free; TestMain's goleak
// check finds no goroutine left behind.
func TestRealStopsOnCancel(t *testing.T) {
	s := sim.Scenario{
		Name: "cancel", Duration: time.Minute, Interval: time.Second,
		Origin: sim.Origin{Workers: 2, Queue: -1, Service: sim.Dist{Kind: sim.Constant, Mean: 50 * time.Millisecond}},
		Load:   sim.Load{Rate: 100, Timeout: time.Second},
		Policies: []sim.Policy{
			sim.NonePolicy{Name: "none"},
			sim.TickerPolicy{Name: "ticker", Rate: 30, Burst: 2, Queue: -1},
			sim.ConcurrencyPolicy{Name: "c", Limit: 2, QueueConfig: sim.QueueConfig{Queue: 10}},
		},
	}
	var ports []string
	listen = func(addr string) (net.Listener, error) {
		ln, err := Listen(addr)
		if err == nil {
			ports = append(ports, ln.Addr().String())
		}
		return ln, err
	}
	defer func() { listen = Listen }()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := RunReal(ctx, s, 0, true)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v to stop", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if len(ports) == 0 {
		t.Fatal("no server was started")
	}
	for _, addr := range ports {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("port %s still taken after the run: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

// TestListenInUse: a port in use is an error that names it.
func TestListenInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("err = %v, want one naming %s", err, ln.Addr())
	}
}

// TestRealStopWaitsForHandlers: a stopped real run returns only once every
// request's handler has ended, even those waiting, detached from their
// connection, for a token that comes once a second under a 20 s client
// timeout.
func TestRealStopWaitsForHandlers(t *testing.T) {
	s := sim.Scenario{
		Name: "handlers", Duration: time.Minute, Interval: time.Second,
		Origin:   sim.Origin{Workers: 1, Queue: -1, Service: sim.Dist{Kind: sim.Constant, Mean: 200 * time.Millisecond}},
		Load:     sim.Load{Rate: 50, Timeout: 20 * time.Second},
		Policies: []sim.Policy{sim.TickerPolicy{Name: "ticker", Rate: 1, Burst: 1, Queue: -1}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := RunReal(ctx, s, 0, true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v to stop", took)
	}
	if n := goroutinesIn("lab.(*front).ServeHTTP"); n > 0 {
		t.Errorf("%d handlers still running after RunReal returned", n)
	}
}

// goroutinesIn counts the goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestRunStopsBetweenSimulations: a stopped lab that runs the simulator
// only (-sim-only) stops before the next experiment and says it was
// stopped, as one on sockets does.
func TestRunStopsBetweenSimulations(t *testing.T) {
	s := quickScenario()
	var plan []Planned
	for _, name := range []string{"a", "b", "c"} {
		plan = append(plan, Planned{Experiment: Experiment{Name: name, TimeScale: 1}, Scenario: s})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C as the first experiment starts.
	res, err := Run(ctx, plan, Options{Progress: writerFunc(func([]byte) { cancel() })})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the context's", err)
	}
	if res == nil || len(res.Experiments) != 1 {
		t.Fatalf("ran %+v, want the first experiment only", res)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }
