package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SLO is a service-level objective as seed 000 wrote it: "99.99%
// availability up to 425 rps; the p95 of all requests within 275 ms".
type SLO struct {
	// Quantile (0.95) of the latency of all requests must be at most
	// Latency.
	Quantile float64
	Latency  time.Duration
	// Success is the least share of requests, in [0, 1], that must succeed
	// (2xx within the client's timeout).
	Success float64
}

// ErrSLO matches every error of ParseSLO.
var ErrSLO = errors.New("bad SLO")

// ParseSLO reads "p95<=275ms,success>=99.99%": a latency percentile bound
// and a success share, in either order; both are required.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	var haveLat, haveSucc bool
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case strings.HasPrefix(part, "p"):
			q, lat, ok := strings.Cut(part[1:], "<=")
			if !ok {
				return SLO{}, fmt.Errorf("%w: %q: want pNN<=DURATION, e.g. p95<=275ms", ErrSLO, part)
			}
			v, err := strconv.ParseFloat(q, 64)
			if err != nil || !(v > 0 && v < 100) { // NaN fails every comparison
				return SLO{}, fmt.Errorf("%w: %q: the percentile must be a number in (0, 100)", ErrSLO, part)
			}
			d, err := time.ParseDuration(lat)
			if err != nil || d <= 0 {
				return SLO{}, fmt.Errorf("%w: %q: the latency must be a positive duration such as 275ms", ErrSLO, part)
			}
			slo.Quantile, slo.Latency, haveLat = v/100, d, true
		case strings.HasPrefix(part, "success>="):
			v := strings.TrimSuffix(part[len("success>="):], "%")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 100) {
				return SLO{}, fmt.Errorf("%w: %q: the success share must be a percentage in (0, 100]", ErrSLO, part)
			}
			slo.Success, haveSucc = f/100, true
		default:
			return SLO{}, fmt.Errorf("%w: %q: want pNN<=DURATION or success>=NN%%", ErrSLO, part)
		}
	}
	if !haveLat || !haveSucc {
		return SLO{}, fmt.Errorf("%w: %q: give both a latency bound and a success share, e.g. p95<=275ms,success>=99.99%%", ErrSLO, s)
	}
	return slo, nil
}

func (s SLO) String() string {
	return fmt.Sprintf("p%s<=%v,success>=%s%%", strconv.FormatFloat(s.Quantile*100, 'f', -1, 64), s.Latency,
		strconv.FormatFloat(s.Success*100, 'f', -1, 64))
}

// Step is one measured load step: a constant open-loop rate held for a
// while against the service.
type Step struct {
	RateRPS float64 `json:"rate_rps"`
	// Sent and Successes count requests; Success is their ratio.
	Sent      int64 `json:"sent"`
	Successes int64 `json:"successes"`
	// Quantile is the SLO's latency percentile of all requests; P50 and
	// Mean of the successes.
	QuantileMs float64 `json:"quantile_ms"`
	P50Ms      float64 `json:"p50_ms"`
	MeanMs     float64 `json:"mean_ms"`
	// Failures counts the requests that did not succeed by how they
	// ended: "HTTP 500", "timeout", "2xx after the timeout", "not sent"...
	Failures map[string]int64 `json:"failures,omitempty"`
	// Behind is true when the generator could not keep its schedule: the
	// step measured the generator, not the service.
	Behind bool `json:"behind,omitempty"`
	// Sustainable is false when the successes' p50 rose past twice the
	// first step's (or 5 ms above it): a queue grew during the step. Past
	// capacity a short step can still meet the SLO while its queue grows
	// without bound, so such a rate is not recommended.
	Sustainable bool `json:"sustainable"`
}

func (s Step) success() float64 {
	if s.Sent == 0 {
		return 0
	}
	return float64(s.Successes) / float64(s.Sent)
}

// failures lists Failures, the most frequent first: "8 HTTP 500, 1 eof".
func (s Step) failures() string {
	kinds := make([]string, 0, len(s.Failures))
	for k := range s.Failures {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		a, b := s.Failures[kinds[i]], s.Failures[kinds[j]]
		return a > b || a == b && kinds[i] < kinds[j]
	})
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%d %s", s.Failures[k], k)
	}
	return strings.Join(kinds, ", ")
}

// Meets reports whether the step met slo.
func (s Step) Meets(slo SLO) bool {
	return s.Sent > 0 && !s.Behind && s.success() >= slo.Success && s.QuantileMs <= ms(slo.Latency)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Measure runs one step at rate and reports it.
type Measure func(ctx context.Context, rate float64) (Step, error)

// Search is the stepped ramp's plan.
type Search struct {
	// Start is the first rate; each step doubles it until the SLO fails
	// (or Max is reached), then bisection narrows the gap between the last
	// rate that met it and the first that did not to Precision.
	Start, Max float64
	// Precision is the relative gap at which bisection stops; 0.02 finds
	// the capacity within 2%.
	Precision float64
}

// ErrNoRate is returned when not even the first step met the SLO.
var ErrNoRate = errors.New("no rate met the SLO")

// Find runs the search with measure and returns every step in the order
// run and the highest rate that met slo and was sustainable (see
// Step.Sustainable). Steps are measured one at a time;
// the decisions are pure functions of the steps, so tests drive Find with
// a model of a service.
func (s Search) Find(ctx context.Context, slo SLO, measure Measure) (steps []Step, best Step, err error) {
	// Written !(in range) so that NaN fails it; an infinite Max would
	// double the rate until it overflowed.
	if !(s.Start > 0 && s.Start <= s.Max && s.Max <= math.MaxFloat64 && s.Precision > 0) {
		return nil, Step{}, fmt.Errorf("capacity search: want 0 < start <= max < +Inf and precision > 0, got start %v, max %v, precision %v", s.Start, s.Max, s.Precision)
	}
	base := -1.0 // the first step's p50: latency without a queue
	run := func(rate float64) (Step, error) {
		st, err := measure(ctx, rate)
		// A step the generator could not keep measured the machine, not
		// the service: measure it again, twice at most.
		for retry := 0; err == nil && st.Behind && retry < 2; retry++ {
			steps = append(steps, st)
			st, err = measure(ctx, rate)
		}
		if err != nil {
			return st, err
		}
		st.RateRPS = rate
		if base < 0 {
			base = st.P50Ms
		}
		st.Sustainable = st.P50Ms <= max(2*base, base+5)
		steps = append(steps, st)
		return st, nil
	}
	ok := func(st Step) bool { return st.Meets(slo) && st.Sustainable }
	lo, hi := 0.0, 0.0
	var st Step
	for rate := s.Start; ; rate = math.Min(2*rate, s.Max) {
		if st, err = run(rate); err != nil {
			return steps, best, err
		}
		if !ok(st) {
			hi = rate
			break
		}
		lo, best = rate, st
		if rate >= s.Max {
			return steps, best, nil // the SLO held up to the most asked for
		}
	}
	if lo == 0 {
		// Why, since a service that fails every request, at any rate,
		// otherwise read as one whose capacity is below the first.
		allFailed := st.Successes == 0 && st.Sent > 0
		why := fmt.Sprintf("success %.3f%%, p%g %.1f ms", 100*st.success(), slo.Quantile*100, st.QuantileMs)
		if allFailed {
			why = fmt.Sprintf("not one of its %d requests succeeded", st.Sent)
		}
		if f := st.failures(); f != "" {
			why += " (" + f + ")"
		}
		if allFailed {
			why += ": the service fails every request even at the lowest rate, not for want of capacity"
		}
		return steps, best, fmt.Errorf("%w: %v failed at %.4g rps, the first step: %s", ErrNoRate, slo, s.Start, why)
	}
	for (hi-lo)/lo > s.Precision {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			// lo and hi are adjacent floats: no rate lies between them,
			// and a Precision finer than that would measure mid for ever.
			break
		}
		st, err := run(mid)
		if err != nil {
			return steps, best, err
		}
		if ok(st) {
			lo, best = mid, st
		} else {
			hi = mid
		}
	}
	return steps, best, nil
}

// Recommendation is what the search advises, seed 000's way.
type Recommendation struct {
	SLO string `json:"slo"`
	// RateRPS is the highest rate that met the SLO: the rate limit.
	RateRPS float64 `json:"rate_limit_rps"`
	// KneeRPS is the first rate at which the successes' p50 rose past
	// twice the lowest rate's: where latency turns up (0 if it never did).
	KneeRPS float64 `json:"knee_rps"`
	// Concurrency is Little's law at that rate, N = X × R with R the
	// no-load latency (the successes' mean at the lowest rate measured),
	// rounded up: the requests in flight that keep the service busy
	// without a queue. R taken at the rate itself would count the queue
	// that forms near capacity, and the limit would admit it.
	Concurrency int `json:"concurrency_limit"`
	// MaxWaitMs is the latency budget left above the SLO percentile at
	// that rate: how long a request may wait for admission and still meet
	// the SLO.
	MaxWaitMs float64 `json:"max_wait_ms"`
	// QuantileMs is the SLO percentile measured at RateRPS.
	QuantileMs float64 `json:"quantile_ms"`
	// Unbounded is true when every rate tried met the SLO: the search
	// stopped at its highest rate (-max), and the capacity is above
	// RateRPS. It is false when the search did not finish.
	Unbounded bool `json:"unbounded,omitempty"`
	// Unfinished is the error that ended the search after a rate had met
	// the SLO, "" if it finished: RateRPS is then the best rate found
	// until the error, and the capacity may be higher.
	Unfinished string `json:"unfinished,omitempty"`
	// BehindRPS is the lowest rate whose step the load generator could
	// not keep (Step.Behind, after its retries), 0 if none: from there
	// on the steps measured the machine, not the service, whose capacity
	// may be above RateRPS.
	BehindRPS float64 `json:"generator_behind_rps,omitempty"`
	Steps     []Step  `json:"steps"`
}

// Recommend turns a search's steps and best step into advice.
func Recommend(slo SLO, steps []Step, best Step) Recommendation {
	r := Recommendation{SLO: slo.String(), RateRPS: best.RateRPS, QuantileMs: best.QuantileMs, Steps: steps}
	r.MaxWaitMs = math.Max(0, ms(slo.Latency)-best.QuantileMs)
	base, noLoad := math.Inf(1), best.MeanMs
	lowest := math.Inf(1)
	for _, s := range steps {
		if s.RateRPS < lowest && s.Successes > 0 {
			lowest, base, noLoad = s.RateRPS, s.P50Ms, s.MeanMs
		}
	}
	r.Concurrency = int(math.Ceil(best.RateRPS * noLoad / 1000))
	knee := math.Inf(1)
	for _, s := range steps {
		if s.Successes > 0 && s.P50Ms > 2*base && s.RateRPS < knee {
			knee = s.RateRPS
		}
		if s.Successes == 0 && s.RateRPS < knee {
			knee = s.RateRPS
		}
	}
	if !math.IsInf(knee, 1) {
		r.KneeRPS = knee
	}
	// A step the generator could not keep is measured again (Find):
	// what counts is the last step at each rate.
	last := map[float64]Step{}
	for _, s := range steps {
		last[s.RateRPS] = s
	}
	r.Unbounded = len(last) > 0
	for rate, s := range last {
		if !s.Meets(slo) || !s.Sustainable {
			r.Unbounded = false
		}
		if s.Behind && (r.BehindRPS == 0 || rate < r.BehindRPS) {
			r.BehindRPS = rate
		}
	}
	return r
}

// Snippet is the recommendation as configuration: Go for the httplimit
// middleware, and YAML for a scenario or proxy policy.
func (r Recommendation) Snippet() string {
	wait := time.Duration(r.MaxWaitMs * float64(time.Millisecond)).Round(time.Millisecond)
	burst := max(1, r.Concurrency)
	return fmt.Sprintf(`// Go, net/http middleware: a rate limit that waits at most %[3]v, and a concurrency cap.
bucket, _ := rate.NewBucket(rate.Config{Rate: %.0[1]f, Burst: %[2]d, MaxWait: %[4]d * time.Millisecond})
inFlight, _ := concurrency.New(concurrency.Config{Limit: %[5]d})
h, _ := httplimit.New(mux, httplimit.Config{Limiter: sluice.All(bucket, inFlight)})

# sluice proxy, a policy for routes[].policy (docs/proxy.md):
policies:
  - name: slo
    max_wait: %[3]v
    rate: {rate: %.0[1]f, burst: %[2]d, max_wait: %[3]v}
    concurrency: {limit: %[5]d}
`, math.Floor(r.RateRPS), burst, wait, wait.Milliseconds(), r.Concurrency)
}
