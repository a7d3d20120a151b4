package sim

import (
	"testing"
	"time"
)

// seed000 is seed 000's service: 10 workers calling an upstream that takes
// about 22 ms (capacity ≈ 450 rps) and times out at 500 ms, offered 600 rps.
func seed000(policies ...Policy) Scenario {
	return Scenario{
		Name: "seed000-600rps", Seed: 0, Duration: 20 * time.Second, Warmup: 2 * time.Second,
		Origin:   Origin{Workers: 10, Queue: Unbounded, Timeout: 500 * ms, Service: Dist{Kind: Lognormal, Mean: 22 * ms, Sigma: 0.3}},
		Load:     Load{Arrivals: PoissonArrivals, Rate: 600},
		Policies: policies,
	}
}

func TestSeed000Shapes(t *testing.T) {
	res, err := Run(seed000(
		NonePolicy{Name: "none"},
		TickerPolicy{Name: "ticker", Rate: 425, Burst: 10, Queue: Unbounded},
		TickerPolicy{Name: "ticker+75ms", Rate: 425, Burst: 10, Queue: Unbounded, MaxWait: 75 * ms},
		TokenBucketPolicy{Name: "bucket+75ms", Rate: 425, Burst: 10, MaxWait: 75 * ms},
	))
	if err != nil {
		t.Fatal(err)
	}
	ratio := func(s Summary) float64 { return float64(s.Successes) / float64(s.Successes+s.Failed) }
	for _, p := range res.Policies {
		s := p.Summary
		t.Logf("%-12s success %5.1f%%, successes p50 %v p99 %v, failures p50 %v p99 %v, origin timeouts %d",
			p.Name, 100*ratio(s), s.Latency.P50, s.Latency.P99, s.RejectLatency.P50, s.RejectLatency.P99, s.OriginTimeouts)
	}
	none, ticker, tickerWait, bucket := res.Policies[0].Summary, res.Policies[1].Summary, res.Policies[2].Summary, res.Policies[3].Summary
	// Seed 000: with no limit the upstream timeout fails a growing share.
	if ratio(none) > 0.85 || none.OriginTimeouts == 0 {
		t.Errorf("no limit: success %.1f%%, want the upstream's timeouts to fail many", 100*ratio(none))
	}
	// Ticker: everything succeeds, after an ever longer wait.
	if ratio(ticker) < 0.99 || ticker.Latency.P50 < time.Second {
		t.Errorf("ticker: success %.1f%%, p50 %v: want ~100%% and latencies past a second", 100*ratio(ticker), ticker.Latency.P50)
	}
	// Ticker + 75 ms wait and token bucket + 75 ms: ~425/600 succeed (the
	// seed measured 72%); the ticker's failures take the full 75 ms, the
	// bucket's are told at once.
	for _, c := range []struct {
		name string
		s    Summary
	}{{"ticker+75ms", tickerWait}, {"bucket+75ms", bucket}} {
		if r := ratio(c.s); r < 0.68 || r > 0.75 {
			t.Errorf("%s: success %.1f%%, want about 425/600 = 71%%", c.name, 100*r)
		}
		if c.s.Latency.P99 > 275*ms {
			t.Errorf("%s: successes p99 %v, want <= 275 ms (the seed's SLA)", c.name, c.s.Latency.P99)
		}
	}
	if tickerWait.RejectLatency.P50 < 74*ms || tickerWait.RejectLatency.P50 > 76*ms {
		t.Errorf("ticker+75ms: failures p50 %v, want 75 ms", tickerWait.RejectLatency.P50)
	}
	if bucket.RejectLatency.P99 >= time.Millisecond {
		t.Errorf("bucket+75ms: failures p99 %v, want < 1 ms", bucket.RejectLatency.P99)
	}
}

func TestSeed004BucketRate(t *testing.T) {
	// Seed 004: a bucket at 300 and 600 req/s under 1,000 req/s offered
	// measured 301 and 598. The simulated bucket is sluice's own.
	for _, r := range []float64{300, 600} {
		p := run1(t, Scenario{
			Seed: 4, Duration: 20 * time.Second,
			Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
			Load:     Load{Arrivals: PoissonArrivals, Rate: 1000},
			Policies: []Policy{TokenBucketPolicy{Rate: r, Burst: 10}},
		})
		if g := p.Summary.Goodput; !within(g, r, 0.01) {
			t.Errorf("bucket at %v/s: admitted %.1f/s, want within 1%%", r, g)
		}
		if pt := p.Series[10]; !within(pt.RejectsBy["rate"], 1000-r, 0.15) || pt.Rejects != pt.RejectsBy["rate"] {
			t.Errorf("bucket at %v/s: point %+v, want about %v rejects/s for rate", r, pt, 1000-r)
		}
	}
}
