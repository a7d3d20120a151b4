package sim

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what Run returns: one PolicyResult per policy, in the
// scenario's order.
type Result struct {
	Scenario string         `json:"scenario"`
	Seed     uint64         `json:"seed"`
	Policies []PolicyResult `json:"policies"`
}

// PolicyResult is one policy's run: a summary over the measured window
// (after Warmup) and a time series with one Point per Interval.
type PolicyResult struct {
	Name    string  `json:"name"`
	Summary Summary `json:"summary"`
	Series  []Point `json:"series"`

	// Simulated is the number of requests the run simulated (all attempts,
	// warm-up included), for throughput figures of the simulator itself.
	Simulated int64 `json:"simulated"`

	latency *hdrhistogram.Histogram // successes, µs, measured window
	wait    *hdrhistogram.Histogram // admission wait of admitted requests, µs
}

// Summary is a policy's figures over the measured window, from Warmup up to,
// not including, Duration (as a Point's interval ends before its T): each
// event (a send, a response, a rejection) counts if it happened in the
// window, and rates are per second of the window.
type Summary struct {
	// Sent counts attempts sent to the policy, retries included.
	Sent int64 `json:"sent"`
	// Unsent counts requests not sent because every client worker was busy.
	Unsent int64 `json:"unsent"`
	// Successes counts responses within the client's deadline.
	Successes int64 `json:"successes"`
	// SucceededBySend counts the requests first sent in the window that
	// succeeded, however long after Duration their answer came: the run
	// goes on past Duration, with no new sends or retries, until each
	// client has its answer or gives up (at its deadline; without one, for
	// another Duration at most). It is what a load generator counts by
	// intended send time; Successes counts by completion time and stops at
	// Duration, which leaves out a queue that drains after a ramp.
	SucceededBySend int64 `json:"succeeded_by_send"`
	// Failed counts attempts that ended without a success: rejected,
	// refused, timed out at the client or at the origin, each once (one the
	// client gave up on that the origin timed out later is one failure).
	// Requests still waiting at the end of the run are neither.
	Failed int64 `json:"failed"`
	// Goodput is successes per second: the headline.
	Goodput float64 `json:"goodput"`
	// Throughput is origin completions per second, wasted work included.
	Throughput float64 `json:"throughput"`
	// Capacity is the origin's capacity (workers / mean service time)
	// averaged over the window: goodput cannot exceed it.
	Capacity float64 `json:"capacity"`
	// Demand is the clients' requests per second: first attempts due,
	// sent or not (unsent included, retries not).
	Demand float64 `json:"demand"`
	// Achievable is the most goodput any policy could have had: the
	// demand served oldest first at the capacity of the moment, as a
	// fluid, each request lost at its client's deadline (none without a
	// timeout), per second of the window. Demand above capacity carries to
	// a later lull while its clients wait; a phase of overload and one of
	// spare capacity do not average out.
	Achievable float64 `json:"achievable"`
	// Rejects counts the policy's rejections by reason (sluice.Reason's
	// labels: "limit", "queue_full", "shed", "rate", "deadline", ...).
	Rejects map[string]int64 `json:"rejects"`
	// Refused counts requests the origin refused (its queue was full).
	Refused int64 `json:"refused"`
	// OriginTimeouts counts requests the origin answered with its timeout.
	OriginTimeouts int64 `json:"origin_timeouts"`
	// Timeouts counts requests the client gave up on at its deadline.
	Timeouts int64 `json:"timeouts"`
	// Retries counts retry attempts sent (also counted in Sent, in the
	// same window: Sent − Retries is the first attempts sent).
	Retries int64 `json:"retries"`
	// Wasted counts origin completions whose client had already gone.
	Wasted int64 `json:"wasted"`
	// Latency is the distribution of successful responses' latency, from
	// the intended send time (a retried request's first, as for a request
	// a load generator sends once).
	Latency Percentiles `json:"latency"`
	// RejectLatency is how long rejected requests took to be told no.
	RejectLatency Percentiles `json:"reject_latency"`
	// Wait is the admission wait of admitted requests (time in the
	// policy's queue).
	Wait Percentiles `json:"wait"`
	// MeanLatency is the mean latency of successes (exact, not from the
	// histogram).
	MeanLatency time.Duration `json:"mean_latency"`
	// MeanWait is the mean time from the intended send to the start of
	// service (a retry's from its own send), the policy's queue and the
	// origin's queue together, of the requests that started service in the
	// window.
	MeanWait time.Duration `json:"mean_wait"`
}

// Percentiles of a latency distribution. Zero when there were no samples.
type Percentiles struct {
	Count int64         `json:"count"`
	P50   time.Duration `json:"p50"`
	P90   time.Duration `json:"p90"`
	P99   time.Duration `json:"p99"`
	P999  time.Duration `json:"p999"`
	Max   time.Duration `json:"max"`
}

// Point is one interval of a policy's time series; rates are per second
// over the interval ending at T, gauges are sampled at T.
type Point struct {
	T          time.Duration `json:"t"`
	Offered    float64       `json:"offered"`    // attempts sent per second
	Goodput    float64       `json:"goodput"`    // successes within deadline per second
	Throughput float64       `json:"throughput"` // origin completions per second
	Rejects    float64       `json:"rejects"`    // policy rejections + origin refusals per second
	// RejectsBy is the policy's rejections per second by reason (the
	// labels of Summary.Rejects); nil when there were none.
	RejectsBy map[string]float64 `json:"rejects_by,omitempty"`
	// RejectedSent is the requests sent in the interval that the policy
	// rejected or the origin refused, then or later, per second: the
	// rejections by when the request came. A request that waited through
	// an overload and is turned away after it ends counts where it came,
	// in the overload, not in the calm after it (which Rejects counts it
	// in).
	RejectedSent float64 `json:"rejected_sent"`
	Timeouts     float64 `json:"timeouts"` // client give-ups per second
	Capacity     float64 `json:"capacity"` // origin capacity, time-averaged over the interval
	Demand       float64 `json:"demand"`   // first attempts due per second, sent or not
	// Achievable is what the oracle served in the interval, per second:
	// the demand, carried while its clients wait, at the capacity (see
	// Summary.Achievable).
	Achievable float64       `json:"achievable"`
	P50        time.Duration `json:"p50"` // successes' latency in the interval
	P99        time.Duration `json:"p99"`
	// AdmittedP50 is the successes' median latency from their admission
	// (the policy's grant) to the answer: the origin's queue and service,
	// without the wait in the policy's queue that P50 includes.
	AdmittedP50 time.Duration `json:"admitted_p50"`
	Limit       float64       `json:"limit"`        // the policy's limit at T (0: none)
	InFlight    int           `json:"in_flight"`    // admitted, not yet released, at T
	Queued      int           `json:"queued"`       // waiting in the policy at T
	OriginBusy  int           `json:"origin_busy"`  // origin workers busy at T
	OriginQ     int           `json:"origin_queue"` // origin queue length at T
}

// SucceededWithin returns how many successful responses in the measured
// window took at most d (with HdrHistogram's 3-digit precision).
func (r *PolicyResult) SucceededWithin(d time.Duration) int64 {
	return countBelow(r.latency, d)
}

// AdmittedWithin returns how many requests in the measured window were
// admitted after waiting at most d in the policy's queue.
func (r *PolicyResult) AdmittedWithin(d time.Duration) int64 {
	return countBelow(r.wait, d)
}
