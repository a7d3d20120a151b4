package sim

import (
	"testing"
	"time"
)

// TestTickerAtOfferedRate: a ticker at exactly the rate of constant
// arrivals has a token for each of them, whatever the rate: request k is
// sent at the instant of tick k, and a tick due by now is counted. Whether
// it was counted used to depend on rounding (at 3 rps one request in three
// was rejected, at 10 rps none).
func TestTickerAtOfferedRate(t *testing.T) {
	for _, r := range []float64{3, 7, 10, 425} {
		p := run1(t, Scenario{
			Duration: 10 * time.Second,
			Origin:   Origin{Workers: 100, Service: Dist{Kind: Constant, Mean: ms}},
			Load:     Load{Rate: r},
			Policies: []Policy{TickerPolicy{Rate: r, Burst: 1}},
		})
		if s := p.Summary; s.Sent != int64(10*r) || len(s.Rejects) != 0 {
			t.Errorf("ticker at %v/s, offered %v/s: %d sent, rejects %v; want %v sent, none rejected", r, r, s.Sent, s.Rejects, 10*r)
		}
	}
}
