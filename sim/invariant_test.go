package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// TestInvariants runs busy scenarios (retries, client and origin timeouts,
// queues everywhere) and checks the engine's books after the run: every
// request slot is either free or accounted for by whoever holds it.
func TestInvariants(t *testing.T) {
	policies := []Policy{
		NonePolicy{},
		ConcurrencyPolicy{Limit: 8, QueueConfig: QueueConfig{Queue: 20, Discipline: concurrency.LIFO}},
		ConcurrencyPolicy{Limit: 8, QueueConfig: QueueConfig{Queue: Unbounded, Discipline: concurrency.AdaptiveLIFO, MaxWait: 30 * ms}},
		AdaptivePolicy{Algorithm: AIMD, QueueConfig: QueueConfig{Queue: 10}},
		TokenBucketPolicy{Rate: 300, Burst: 5, MaxWait: 20 * ms},
		TickerPolicy{Rate: 300, Burst: 5, Queue: 50, MaxWait: 40 * ms},
	}
	for seed := uint64(1); seed <= 3; seed++ {
		s := Scenario{
			Seed: seed, Duration: 5 * time.Second,
			Origin: Origin{
				Workers: 8, Queue: 16, Timeout: 80 * ms, Service: Dist{Kind: Lognormal, Mean: 20 * ms, Sigma: 1},
				Changes: []Change{{At: 2 * time.Second, Workers: 3}, {At: 3 * time.Second, Workers: 12}},
			},
			Load: Load{
				Arrivals: PoissonArrivals, Rate: 300, Steps: []Step{{At: time.Second, Rate: 900}, {At: 4 * time.Second, Rate: 100}},
				Bursts:  Bursts{Size: 300, Every: time.Second, Count: 3, At: 500 * ms},
				Timeout: 60 * ms, ClientWorkers: 200,
				Retries: Retries{Max: 2, Budget: 0.5, Backoff: 5 * ms},
			},
			Policies: policies,
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := range s.Policies {
			e, err := newEngine(&s, i)
			if err != nil {
				t.Fatal(err)
			}
			e.run()
			checkBooks(t, fmt.Sprintf("seed %d policy %s", seed, s.Policies[i].Kind()), e)
		}
	}
}

func checkBooks(t *testing.T, name string, e *engine) {
	t.Helper()
	free := make(map[int32]bool, len(e.free))
	for _, id := range e.free {
		if free[id] {
			t.Fatalf("%s: slot %d freed twice", name, id)
		}
		free[id] = true
	}
	var client, holding, queued, serving, waiting int
	for id := int32(0); id < e.npool; id++ {
		r := e.req(id)
		if free[id] {
			if r.clientOK || r.waiting || r.holding || r.oqueued || r.answered {
				t.Fatalf("%s: free slot %d still in use: %+v", name, id, *r)
			}
			continue
		}
		if !(r.clientOK || r.waiting || r.holding || r.oqueued || r.answered) {
			t.Fatalf("%s: slot %d leaked: %+v", name, id, *r)
		}
		if r.clientOK {
			client++
		}
		if r.holding {
			holding++
		}
		if r.oqueued {
			queued++
		}
		if r.waiting {
			waiting++
		}
		// In service: admitted and not queued at the origin, or answered
		// by the origin's timeout while its worker still works on it.
		if r.holding && !r.oqueued || r.answered {
			serving++
		}
	}
	if client != e.clientBusy || holding != e.inFlight || queued != e.org.n {
		t.Errorf("%s: books: %d client-held vs clientBusy %d, %d holding vs inFlight %d, %d origin-queued vs %d",
			name, client, e.clientBusy, holding, e.inFlight, queued, e.org.n)
	}
	if waiting != e.pol.queued() {
		t.Errorf("%s: %d requests waiting in the policy vs its queue of %d", name, waiting, e.pol.queued())
	}
	if serving != e.org.busy {
		t.Errorf("%s: %d requests in service vs origin busy %d", name, serving, e.org.busy)
	}
}
