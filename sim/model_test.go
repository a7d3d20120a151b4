package sim

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func run1(t *testing.T, s Scenario) PolicyResult {
	t.Helper()
	res, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	return res.Policies[0]
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

func TestDeterministic(t *testing.T) {
	s := overload(2, AdaptivePolicy{Algorithm: Gradient2}, TokenBucketPolicy{Rate: 1000, MaxWait: 20 * ms})
	s.Duration, s.Warmup = 3*time.Second, 0
	a, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(s)
	if !reflect.DeepEqual(a.Policies[0].Series, b.Policies[0].Series) || !reflect.DeepEqual(a.Policies[1].Summary, b.Policies[1].Summary) {
		t.Error("two runs of the same scenario differ")
	}
	s.Seed++
	c, _ := Run(s)
	if reflect.DeepEqual(a.Policies[0].Summary, c.Policies[0].Summary) {
		t.Error("a different seed gave the same run")
	}
}

func TestBelowCapacity(t *testing.T) {
	// Half the capacity of constant work: every request is served at once,
	// in exactly the service time, and the series has one point per second.
	// The last two sends (9.98 s and 9.99 s) are answered at or after the
	// end, outside the window [0, 10 s).
	p := run1(t, Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 4, Service: Dist{Kind: Constant, Mean: 20 * ms}},
		Load:     Load{Rate: 100, Timeout: time.Second},
		Policies: []Policy{ConcurrencyPolicy{Limit: 4}},
	})
	s := p.Summary
	if s.Sent != 1000 || s.Successes != 998 || s.RejectLatency.Count != 0 || s.Timeouts != 0 {
		t.Errorf("sent %d, successes %d, rejects %v, timeouts %d: want 1000 sent, 998 served by the end", s.Sent, s.Successes, s.Rejects, s.Timeouts)
	}
	if s.Latency.Max > 21*ms || s.Latency.P50 < 19*ms {
		t.Errorf("latency %+v, want 20 ms", s.Latency)
	}
	if !within(s.Capacity, 200, 1e-9) || len(p.Series) != 10 || p.Series[9].T != 10*time.Second {
		t.Errorf("capacity %v, %d points ending at %v: want 200 rps, 10 points to 10s", s.Capacity, len(p.Series), p.Series[len(p.Series)-1].T)
	}
	if p.Series[5].Goodput != 100 || p.Series[5].Limit != 4 {
		t.Errorf("point %+v, want goodput 100 and limit 4", p.Series[5])
	}
}

func TestMMcReference(t *testing.T) {
	// §0.2's Erlang-C figures for 16 workers, exponential 10 ms, ρ = 0.8:
	// p50 8.0 ms, p99 47 ms. The origin model must reproduce queueing theory
	// before any policy result means anything.
	p := run1(t, Scenario{
		Seed: 2, Duration: 60 * time.Second, Warmup: 5 * time.Second,
		Origin:   Origin{Workers: 16, Queue: Unbounded, Service: Dist{Kind: Exponential, Mean: 10 * ms}},
		Load:     Load{Arrivals: PoissonArrivals, Rate: 1280},
		Policies: []Policy{NonePolicy{}},
	})
	l := p.Summary.Latency
	t.Logf("M/M/16 at ρ = 0.8: p50 %v, p90 %v, p99 %v, p99.9 %v; goodput %.0f rps", l.P50, l.P90, l.P99, l.P999, p.Summary.Goodput)
	if !within(float64(l.P50), float64(8*ms), 0.1) || !within(float64(l.P99), float64(47*ms), 0.1) {
		t.Errorf("p50 %v p99 %v, want 8.0 ms and 47 ms within 10%%", l.P50, l.P99)
	}
	if !within(p.Summary.Goodput, 1280, 0.02) {
		t.Errorf("goodput %.0f, want the offered 1280", p.Summary.Goodput)
	}
}

func TestArrivals(t *testing.T) {
	base := func(l Load) Scenario {
		return Scenario{
			Seed: 5, Duration: 10 * time.Second,
			Origin: Origin{Workers: 1000, Service: Dist{Kind: Constant, Mean: ms}}, Load: l, Policies: []Policy{NonePolicy{}},
		}
	}
	tests := []struct {
		name string
		load Load
		want float64
		tol  float64
	}{
		{"constant", Load{Rate: 100}, 1000, 0.001},
		{"steps", Load{Rate: 100, Steps: []Step{{At: 5 * time.Second, Rate: 300}}}, 2000, 0.001},
		{"ramp", Load{Rate: 0, Steps: []Step{{At: 10 * time.Second, Rate: 200}}, Ramp: true}, 1000, 0.002},
		{"ramp-down-and-hold", Load{Rate: 200, Steps: []Step{{At: 5 * time.Second, Rate: 0}, {At: 8 * time.Second, Rate: 100}}, Ramp: true}, 500 + 150 + 200, 0.005},
		{"gap", Load{Rate: 100, Steps: []Step{{At: 2 * time.Second, Rate: 0}, {At: 4 * time.Second, Rate: 100}}}, 800, 0.002},
		{"bursts", Load{Bursts: Bursts{Size: 50, Every: time.Second, Count: 4, At: time.Second}}, 200, 0},
		{"poisson", Load{Arrivals: PoissonArrivals, Rate: 1000}, 10000, 0.03}, // 3σ = 3%
		{"poisson-ramp", Load{Arrivals: PoissonArrivals, Rate: 0, Steps: []Step{{At: 10 * time.Second, Rate: 2000}}, Ramp: true}, 10000, 0.03},
	}
	for _, tt := range tests {
		got := float64(run1(t, base(tt.load)).Summary.Sent)
		if !within(got, tt.want, tt.tol) {
			t.Errorf("%s: %v requests sent, want %v (±%v%%)", tt.name, got, tt.want, 100*tt.tol)
		}
	}
}

func TestRateAt(t *testing.T) {
	s := time.Second
	steps := Load{Rate: 100, Steps: []Step{{At: 5 * s, Rate: 300}}}
	ramp := Load{Rate: 200, Steps: []Step{{At: 5 * s, Rate: 0}, {At: 8 * s, Rate: 100}}, Ramp: true}
	tests := []struct {
		load *Load
		at   time.Duration
		want float64
	}{
		{&steps, 0, 100}, {&steps, 4999 * time.Millisecond, 100}, {&steps, 5 * s, 300}, {&steps, time.Hour, 300},
		{&ramp, 0, 200}, {&ramp, 2500 * time.Millisecond, 100}, {&ramp, 5 * s, 0}, {&ramp, 6500 * time.Millisecond, 50}, {&ramp, 9 * s, 100},
	}
	for _, tt := range tests {
		if got := tt.load.RateAt(tt.at); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%+v at %v: rate %v, want %v", *tt.load, tt.at, got, tt.want)
		}
	}
}

func TestClientWorkers(t *testing.T) {
	// Two client workers and 950 ms of work: two requests a second are
	// sent, the other eight due each second are not. (With 1 s, an answer
	// would come at the instant a send is due, which finds the worker still
	// busy: TestTieOrder.)
	p := run1(t, Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 10, Service: Dist{Kind: Constant, Mean: 950 * time.Millisecond}},
		Load:     Load{Rate: 10, ClientWorkers: 2},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Sent != 20 || s.Unsent != 80 {
		t.Errorf("sent %d, unsent %d: want 20 and 80", s.Sent, s.Unsent)
	}
}

// TestTieOrder: at one instant the client's events come before the system's
// answers, as on real sockets, where an answer reaches the limiter and the
// client a hop after it is due.
func TestTieOrder(t *testing.T) {
	// A slot of 1 s freed at the instant the next request (1 rps) is due:
	// that request finds the slot taken, the one after it gets it.
	p := run1(t, Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: time.Second}},
		Load:     Load{Rate: 1},
		Policies: []Policy{ConcurrencyPolicy{Limit: 1}},
	})
	if s := p.Summary; s.Successes != 5 || s.Rejects["limit"] != 5 {
		t.Errorf("limit 1, 1 s of work, 1 rps: %d successes, %d rejections; want 5 and 5 (a send due as a slot frees finds it taken)",
			s.Successes, s.Rejects["limit"])
	}

	// An answer due at the instant of the client's deadline comes too late.
	// The last request's deadline, at 10 s, is the end: outside the window.
	p = run1(t, Scenario{
		Duration: 10 * time.Second,
		Origin:   Origin{Workers: 10, Service: Dist{Kind: Constant, Mean: time.Second}},
		Load:     Load{Rate: 1, Timeout: time.Second},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Successes != 0 || s.Timeouts != 9 {
		t.Errorf("1 s of work, 1 s timeout: %d successes, %d timeouts; want 0 and 9", s.Successes, s.Timeouts)
	}
}

// TestWindowHalfOpen: the summary counts events in [Warmup, Duration), as
// a Point counts those in [its start, T). Constant 10 rps into one worker of
// 100 ms: capacity is exactly 10 rps, and request k, sent at k × 100 ms, is
// answered at (k+1) × 100 ms. The answer at 10 s is at the end, outside;
// with a warm-up of 1 s the answer at 1 s is inside, the send at 0.9 s
// outside, and goodput is capacity, not more.
func TestWindowHalfOpen(t *testing.T) {
	for _, tt := range []struct {
		warmup          time.Duration
		sent, successes int64
	}{{0, 100, 99}, {time.Second, 90, 90}} {
		p := run1(t, Scenario{
			Duration: 10 * time.Second, Warmup: tt.warmup,
			Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: 100 * ms}},
			Load:     Load{Rate: 10},
			Policies: []Policy{NonePolicy{}},
		})
		s := p.Summary
		if s.Sent != tt.sent || s.Successes != tt.successes || s.Goodput > s.Capacity {
			t.Errorf("warmup %v: %d sent, %d successes, goodput %v of capacity %v; want %d, %d and goodput <= capacity",
				tt.warmup, s.Sent, s.Successes, s.Goodput, s.Capacity, tt.sent, tt.successes)
		}
		var series float64 // the window's Points: it is whole intervals
		for _, pt := range p.Series {
			if pt.T > tt.warmup {
				series += pt.Goodput
			}
		}
		if int64(series) != s.Successes {
			t.Errorf("warmup %v: the window's Points hold %v successes, the summary %d", tt.warmup, series, s.Successes)
		}
	}
}

// TestSucceededBySend: requests queued at the end of the run are followed
// to their answers, as a load generator waits for them, and counted by
// their send time; Successes stops at Duration.
func TestSucceededBySend(t *testing.T) {
	// 20 requests in 1 s to one worker of 100 ms: request k (sent at
	// k × 50 ms) is answered at (k+1) × 100 ms, after 100 + 50k ms. Nine
	// answers come before the end (the tenth is at 1 s, the end, outside
	// the window [0, 1 s)); with a 1 s timeout, k = 0..17 succeed
	// (k = 18 is answered at its deadline, too late).
	for _, tt := range []struct {
		timeout time.Duration
		want    int64
	}{{time.Second, 18}, {0, 20}} {
		p := run1(t, Scenario{
			Duration: time.Second,
			Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: 100 * ms}},
			Load:     Load{Rate: 20, Timeout: tt.timeout},
			Policies: []Policy{NonePolicy{}},
		})
		if s := p.Summary; s.Successes != 9 || s.SucceededBySend != tt.want {
			t.Errorf("timeout %v: %d successes by the end, %d by send time; want 9 and %d", tt.timeout, s.Successes, s.SucceededBySend, tt.want)
		}
	}

	// After the end nothing is retried: a request sent at 900 ms that
	// fails at once would retry at 1.1 s.
	p := run1(t, Scenario{
		Duration: time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 100 * ms}},
		Load:     Load{Rate: 10, Timeout: time.Second, Retries: Retries{Max: 3, Backoff: 200 * ms}},
		Policies: []Policy{TokenBucketPolicy{Rate: 1, Burst: 1}},
	})
	if s := p.Summary; s.SucceededBySend != s.Successes {
		t.Errorf("with retries: %d successes, %d by send time; want the same (no retry after the end)", s.Successes, s.SucceededBySend)
	}
}

// TestFailedOncePerAttempt: an attempt the client gave up on that the
// origin then times out is one failed attempt, not two. Three requests at
// once to a worker busy for 10 s: the client gives up on each at 1 s, the
// origin times them out at 2 s.
func TestFailedOncePerAttempt(t *testing.T) {
	p := run1(t, Scenario{
		Duration: 5 * time.Second,
		Origin:   Origin{Workers: 1, Queue: Unbounded, Timeout: 2 * time.Second, Service: Dist{Kind: Constant, Mean: 10 * time.Second}},
		Load:     Load{Bursts: Bursts{Size: 3, Count: 1}, Timeout: time.Second},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Sent != 3 || s.Timeouts != 3 || s.OriginTimeouts != 3 || s.Failed != 3 {
		t.Errorf("%d sent, %d timeouts, %d origin timeouts, %d failed; want 3 of each", s.Sent, s.Timeouts, s.OriginTimeouts, s.Failed)
	}
}

// TestRetryIsTheSameRequest: a retry keeps its request's deadline and its
// latency is counted from the request's intended send, as a load generator
// measures a request.
func TestRetryIsTheSameRequest(t *testing.T) {
	// Two requests at once to one worker of 600 ms, a 1 s timeout: the
	// second is still queued at its deadline and the client gives up; a
	// retry then could only be answered after it.
	p := run1(t, Scenario{
		Duration: 5 * time.Second,
		Origin:   Origin{Workers: 1, Queue: Unbounded, Service: Dist{Kind: Constant, Mean: 600 * ms}},
		Load:     Load{Bursts: Bursts{Size: 2, Count: 1}, Timeout: time.Second, Retries: Retries{Max: 3}},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Successes != 1 || s.Timeouts != 1 || s.Retries != 0 || s.Latency.Max > 601*ms {
		t.Errorf("timed out: %d successes, %d timeouts, %d retries, latency max %v; want 1, 1, 0 and 600ms",
			s.Successes, s.Timeouts, s.Retries, s.Latency.Max)
	}

	// The same without a timeout, and an origin that refuses while its
	// worker is busy: the second request is retried until the first is
	// answered at 100 ms, so it is answered at least 200 ms after it was
	// first sent, whatever the attempt that succeeded.
	p = run1(t, Scenario{
		Seed: 1, Duration: 5 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 100 * ms}},
		Load:     Load{Bursts: Bursts{Size: 2, Count: 1}, Retries: Retries{Max: 10, Backoff: 100 * ms}},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Successes != 2 || s.Retries == 0 || s.Latency.Max < 200*ms {
		t.Errorf("refused: %d successes, %d retries, latency max %v; want 2, some and >= 200ms", s.Successes, s.Retries, s.Latency.Max)
	}

	// A retry whose backoff (here up to 10 s) ends past the 100 ms
	// deadline is not sent: the client gives up when it is refused.
	p = run1(t, Scenario{
		Seed: 1, Duration: 5 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 10 * ms}},
		Load:     Load{Bursts: Bursts{Size: 2, Count: 1}, Timeout: 100 * ms, Retries: Retries{Max: 1, Backoff: 10 * time.Second}},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.Successes != 1 || s.Refused != 1 || s.Retries != 0 || s.Timeouts != 0 {
		t.Errorf("backoff past the deadline: %d successes, %d refused, %d retries, %d timeouts; want 1, 1, 0, 0",
			s.Successes, s.Refused, s.Retries, s.Timeouts)
	}
}

func TestRetryBudget(t *testing.T) {
	s := Scenario{
		Seed: 1, Duration: 10 * time.Second,
		Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
		Load:     Load{Rate: 100, Timeout: time.Second, Retries: Retries{Max: 3, Backoff: 10 * ms}},
		Policies: []Policy{TokenBucketPolicy{Rate: 10, Burst: 1}},
	}
	unbudgeted := run1(t, s).Summary
	s.Load.Retries.Budget = 0.1
	budgeted := run1(t, s).Summary
	first := budgeted.Sent - budgeted.Retries
	t.Logf("no budget: %d sent, %d retries; budget 0.1: %d first attempts, %d retries", unbudgeted.Sent, unbudgeted.Retries, first, budgeted.Retries)
	if unbudgeted.Retries < 2*1000 {
		t.Errorf("without a budget %d retries, want nearly 3 per rejected request", unbudgeted.Retries)
	}
	if budgeted.Retries > first/10+10 || budgeted.Retries < first/10-10 {
		t.Errorf("with a 10%% budget %d retries for %d requests, want about %d", budgeted.Retries, first, first/10)
	}
}

func TestOriginTimeoutAndChanges(t *testing.T) {
	// One worker at 1 s per request, an origin timeout of 500 ms: the
	// queued requests are answered with an error at 500 ms; at 5 s the
	// origin gets 10 workers of 100 ms work and serves everything.
	p := run1(t, Scenario{
		Duration: 10 * time.Second,
		Origin: Origin{
			Workers: 1, Queue: Unbounded, Timeout: 500 * ms, Service: Dist{Kind: Constant, Mean: time.Second},
			Changes: []Change{{At: 5 * time.Second, Workers: 10, Service: Dist{Kind: Constant, Mean: 100 * ms}}},
		},
		Load:     Load{Rate: 10},
		Policies: []Policy{NonePolicy{}},
	})
	s := p.Summary
	if s.OriginTimeouts < 45 || s.Successes < 50 {
		t.Errorf("origin timeouts %d, successes %d: want about 50 of each", s.OriginTimeouts, s.Successes)
	}
	if p.Series[2].Capacity != 1 || p.Series[7].Capacity != 100 || !within(s.Capacity, 50.5, 1e-9) {
		t.Errorf("capacity %v then %v, mean %v: want 1, 100 and 50.5", p.Series[2].Capacity, p.Series[7].Capacity, s.Capacity)
	}
}

func TestDistributions(t *testing.T) {
	// The mean service time each distribution was asked for, measured
	// through the origin with no queueing.
	for _, d := range []Dist{
		{Kind: Constant, Mean: 10 * ms},
		{Kind: Exponential, Mean: 10 * ms},
		{Kind: Lognormal, Mean: 10 * ms, Sigma: 0.5},
		{Kind: Bimodal, Mean: 5 * ms, Tail: 55 * ms, TailFraction: 0.1},
	} {
		p := run1(t, Scenario{
			Seed: 9, Duration: 20 * time.Second,
			Origin: Origin{Workers: 1000, Service: d}, Load: Load{Arrivals: PoissonArrivals, Rate: 2000}, Policies: []Policy{NonePolicy{}},
		})
		// Little's law: mean in service = throughput × mean service time.
		var busy float64
		for _, pt := range p.Series {
			busy += float64(pt.OriginBusy)
		}
		busy /= float64(len(p.Series))
		svc := busy / p.Summary.Throughput
		if !within(svc, 0.010, 0.1) {
			t.Errorf("%s: mean service %.4f s by Little's law, want 0.010", d.Kind, svc)
		}
	}
}

// TestRetriesCountedWhenSent: Retries counts the retry attempts sent in the
// window, as Sent does, so Sent − Retries is the first attempts sent in it
// (Demand × window − Unsent). Two requests at once to one busy worker with
// no queue: the second is refused and retried after a backoff of up to 1 s
// or 10 s, which can take the retry past the end of the window, or from
// before the warm-up into it.
func TestRetriesCountedWhenSent(t *testing.T) {
	for _, tt := range []struct {
		warmup, duration, backoff time.Duration
	}{
		{0, time.Second, 10 * time.Second},          // the retry is due after the end
		{time.Second, 2 * time.Second, time.Second}, // before the warm-up, retried in the window
	} {
		p := run1(t, Scenario{
			Seed: 1, Duration: tt.duration, Warmup: tt.warmup, Interval: 100 * ms,
			Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 100 * ms}},
			Load:     Load{Bursts: Bursts{Size: 2, Count: 1, At: 900 * ms}, Retries: Retries{Max: 1, Backoff: tt.backoff}},
			Policies: []Policy{NonePolicy{}},
		})
		s := p.Summary
		first := int64(math.Round(s.Demand*(tt.duration-tt.warmup).Seconds())) - s.Unsent
		if s.Sent-s.Retries != first {
			t.Errorf("warmup %v, backoff %v: %d sent, %d retries, %d first attempts sent; want sent − retries = first attempts",
				tt.warmup, tt.backoff, s.Sent, s.Retries, first)
		}
	}
}

// TestOriginTimeoutBeforeWorkerFrees: a request whose origin timeout comes
// at the instant a worker frees has timed out: it leaves the queue and the
// worker takes the next, as a request answered at its own timeout's
// instant is timed out. Whether it was served depended on which event had
// been scheduled first.
func TestOriginTimeoutBeforeWorkerFrees(t *testing.T) {
	// One worker, a 500 ms timeout, 1 s of work until 500 ms and 100 ms
	// after. A (sent at 0) is timed out at 500 ms and its worker frees at
	// 1 s, the instant Y (sent at 500 ms) times out in the queue. Z (sent
	// at 1 s) then starts at once and is answered at 1.1 s.
	p := run1(t, Scenario{
		Duration: 1500 * ms,
		Origin: Origin{
			Workers: 1, Queue: Unbounded, Timeout: 500 * ms, Service: Dist{Kind: Constant, Mean: time.Second},
			Changes: []Change{{At: 500 * ms, Service: Dist{Kind: Constant, Mean: 100 * ms}}},
		},
		Load:     Load{Rate: 2},
		Policies: []Policy{NonePolicy{}},
	})
	if s := p.Summary; s.OriginTimeouts != 2 || s.Wasted != 1 || s.Successes != 1 || s.Latency.Max > 101*ms {
		t.Errorf("%d origin timeouts, %d wasted, %d successes in %v; want 2 (A, Y), 1 (A's work), 1 (Z) in 100ms",
			s.OriginTimeouts, s.Wasted, s.Successes, s.Latency.Max)
	}
}

// TestNoRetryAtTheEnd: a request that fails at the very end of the run is
// not retried: the end is outside the window, and the drain after it sends
// no retries (nor any request: none is sent at the end). Two requests at
// once, 1 ns before 1.9 s, to a limit of 1 with a queue whose max_wait is
// 100 ms: the first holds the slot until 2 s, the end, when the second's
// wait runs out.
func TestNoRetryAtTheEnd(t *testing.T) {
	p := run1(t, Scenario{
		Duration: 2 * time.Second,
		Origin:   Origin{Workers: 1, Service: Dist{Kind: Constant, Mean: 100*ms + 1}},
		Load:     Load{Bursts: Bursts{Size: 2, Count: 1, At: 1900*ms - 1}, Retries: Retries{Max: 1}},
		Policies: []Policy{ConcurrencyPolicy{Limit: 1, QueueConfig: QueueConfig{Queue: 1, MaxWait: 100 * ms}}},
	})
	if s := p.Summary; s.SucceededBySend != 1 {
		t.Errorf("%d succeeded by send time, want 1: the second request is turned away at the end, and not retried", s.SucceededBySend)
	}
}
