package sim

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/waitrule"
	"github.com/sluicehq/sluice/rate"
)

// bucketGate drives sluice's rate.Bucket (TokenBucketPolicy) in virtual time: AllowAt when
// requests may not wait, ReserveAt when they may wait up to MaxWait and their
// deadline (seed 000's "token bucket + deadline": a reservation that cannot
// be met in time is rejected at once). How long a request may wait, and its
// reason when it may not, is waitrule's, as in rate.Bucket.Wait.
type bucketGate struct {
	e       *engine
	b       *rate.Bucket
	maxWait int64
	rate    float64
	pending map[int32]rate.Reservation
}

func (p TokenBucketPolicy) start(e *engine) (gate, error) {
	b, err := rate.NewBucket(rate.Config{Rate: p.Rate, Burst: max(p.Burst, 1)})
	if err != nil {
		return nil, err
	}
	return &bucketGate{e: e, b: b, maxWait: int64(p.MaxWait), rate: p.Rate, pending: make(map[int32]rate.Reservation)}, nil
}

func (p *bucketGate) arrive(now int64, id int32, r *request) {
	if p.maxWait == 0 {
		if p.b.AllowAt(p.e.t(now), 1) {
			p.e.admit(id, r, 0)
		} else {
			p.e.reject(id, r, sluice.ReasonRate)
		}
		return
	}
	// The library's rule for how long a caller may wait, and why it is
	// rejected past that (rate.Bucket's Wait applies the same one).
	// Virtual nanoseconds are a clock like any other; never is
	// waitrule.NoDeadline.
	wait, why := waitrule.Bound(now, r.deadline, time.Duration(p.maxWait))
	res, ok := p.b.ReserveAt(p.e.t(now), 1, wait)
	switch {
	case !ok:
		if res.Reason() == sluice.ReasonTooLarge {
			why = sluice.ReasonTooLarge
		}
		p.e.reject(id, r, why)
	case res.Delay() <= 0:
		p.e.admit(id, r, 0)
	default:
		r.waiting = true
		p.pending[id] = res
		p.e.schedule(now+int64(res.Delay()), evGrant, id, r.gen)
	}
}

// grant admits a request whose reservation is due.
func (p *bucketGate) grant(id int32, r *request) {
	if !r.waiting {
		return
	}
	delete(p.pending, id)
	p.e.admit(id, r, 0)
}

func (p *bucketGate) cancel(_ int64, id int32, _ *request) {
	if res, ok := p.pending[id]; ok {
		res.Cancel()
		delete(p.pending, id)
	}
}

func (p *bucketGate) release(int64, int32, *request, sluice.Outcome, int64) {}
func (p *bucketGate) wake(int64)                                            {}
func (p *bucketGate) limit() float64                                        { return p.rate }
func (p *bucketGate) queued() int                                           { return len(p.pending) }
