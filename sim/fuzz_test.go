package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// FuzzRun builds scenarios from arbitrary numbers and checks that Validate
// either refuses them with a FieldError or Run completes without error:
// nothing reachable from a scenario panics, and a valid run ends. Durations are taken as
// given (they may be huge or negative) so that overflow is reached; a valid
// scenario is run only if it is small, to keep the fuzzer fast.
func FuzzRun(f *testing.F) {
	f.Add(int64(time.Second), int64(0), int64(0), 4, 0, int64(0), uint8(0), int64(10*ms), 0.0,
		100.0, int64(0), 0, 0, int64(0), int64(0), 0, 0.0, int64(0),
		uint8(1), 8, 4, int64(0), uint8(0), 0.0, int64(0))
	f.Add(int64(2*time.Second), int64(100*ms), int64(500*ms), 3, -1, int64(50*ms), uint8(2), int64(20*ms), 0.5,
		500.0, int64(time.Second), 50, 3, int64(100*ms), int64(60*ms), 2, 0.5, int64(5*ms),
		uint8(4), 0, 10, int64(30*ms), uint8(3), 300.0, int64(0))
	f.Add(int64(time.Second), int64(0), int64(0), 2, 5, int64(0), uint8(3), int64(ms), 0.0,
		50.0, int64(0), 0, 0, int64(0), int64(10*ms), 1, 0.0, int64(1<<62),
		uint8(5), 0, 5, int64(1<<62), uint8(0), 1e-12, int64(0))
	f.Fuzz(func(t *testing.T, dur, interval, warmup int64, workers, oqueue int, otimeout int64, kind uint8, mean int64, sigma float64,
		rate float64, stepAt int64, burstSize, burstCount int, burstEvery int64, timeout int64, retries int, budget float64, backoff int64,
		pkind uint8, limit, pqueue int, maxWait int64, disc uint8, prate float64, changeAt int64) {
		kinds := []DistKind{Constant, Exponential, Lognormal, Bimodal}
		pkinds := []PolicyKind{None, Concurrency, Adaptive, TokenBucket, Ticker, Adaptive}
		s := Scenario{
			Seed: 1, Duration: time.Duration(dur), Interval: time.Duration(interval), Warmup: time.Duration(warmup),
			Origin: Origin{Workers: workers, Queue: oqueue, Timeout: time.Duration(otimeout),
				Service: Dist{Kind: kinds[int(kind)%len(kinds)], Mean: time.Duration(mean)}},
			Load: Load{Rate: rate, Timeout: time.Duration(timeout),
				Retries: Retries{Max: retries, Budget: budget, Backoff: time.Duration(backoff)}},
		}
		if s.Origin.Service.Kind == Lognormal {
			s.Origin.Service.Sigma = sigma
		}
		if s.Origin.Service.Kind == Bimodal {
			s.Origin.Service.Tail, s.Origin.Service.TailFraction = 10*time.Duration(mean), 0.1
		}
		if stepAt != 0 {
			s.Load.Steps = []Step{{At: time.Duration(stepAt), Rate: 2 * rate}}
		}
		if burstSize != 0 {
			s.Load.Bursts = Bursts{Size: burstSize, Count: burstCount, Every: time.Duration(burstEvery)}
		}
		if changeAt != 0 {
			s.Origin.Changes = []Change{{At: time.Duration(changeAt), Workers: max(workers/2, 1)}}
		}
		var p Policy
		wait := time.Duration(maxWait)
		switch k := int(pkind) % len(pkinds); pkinds[k] {
		case None:
			p = NonePolicy{}
		case Concurrency:
			p = ConcurrencyPolicy{Limit: limit, QueueConfig: QueueConfig{Queue: pqueue, MaxWait: wait, Discipline: concurrency.Discipline(int(disc) % 4)}}
		case Adaptive:
			a := AdaptivePolicy{Limit: limit, QueueConfig: QueueConfig{Queue: pqueue, MaxWait: wait, Discipline: concurrency.Discipline(int(disc) % 4)}}
			if k == 5 {
				a.Algorithm = []AlgorithmKind{AIMD, Vegas, Gradient2}[int(disc)%3]
			}
			p = a
		case TokenBucket:
			p = TokenBucketPolicy{Rate: prate, Burst: limit, MaxWait: wait}
		case Ticker:
			p = TickerPolicy{Rate: prate, Burst: limit, Queue: pqueue, MaxWait: wait}
		}
		s.Policies = []Policy{p}
		err := s.Validate()
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: %v is not a *FieldError matching ErrInvalid", err)
			}
			return
		}
		if _, _, points, requests := s.size(); points > 10_000 || requests > 100_000 {
			return // valid but long: the fuzzer's time is better spent elsewhere
		}
		if _, err := Run(s); err != nil {
			t.Fatalf("Run refused a scenario Validate passed: %v", err)
		}
	})
}
