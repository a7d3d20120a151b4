// Package report turns the result of a scenario run into what people and
// programs read: a summary table (Table), JSON (JSON) and a plot over time
// (Plot).
//
// Report is the one model all three render. Its JSON form is a stable,
// documented interface (see docs/scenarios.md): field names are snake_case,
// rates are per second and carry "_rps", latencies are milliseconds and carry
// "_ms", times in a series are seconds since the start ("t_s"). New fields
// may be added; existing ones keep their name and meaning.
//
// The report does not compute statistics: the simulator (or, later, the lab's
// load generator) measures; FromSim copies its figures into this model.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Version is the JSON schema version, bumped only if a field changes meaning.
const Version = 1

// Report is one scenario run: every policy measured under the same load.
type Report struct {
	// Version is the JSON schema version (Version).
	Version int `json:"version"`
	// Scenario is the scenario's name; File the file it came from, if any.
	Scenario string `json:"scenario"`
	File     string `json:"file,omitempty"`
	// Seed is the random seed the run used: the same seed, the same figures.
	Seed uint64 `json:"seed"`
	// DurationS is the simulated time, IntervalS the width of one series
	// point, both in seconds.
	DurationS float64 `json:"duration_s"`
	IntervalS float64 `json:"interval_s"`
	// Policies holds one entry per policy, in the scenario's order.
	Policies []Policy `json:"policies"`
}

// Policy is what one policy achieved.
type Policy struct {
	Name string `json:"name"`
	// Kind is the policy's kind as the scenario names it: none,
	// concurrency, adaptive, token-bucket, ticker.
	Kind    string  `json:"kind"`
	Summary Summary `json:"summary"`
	// Phases is goodput between the origin's changes (a slowdown, workers
	// lost), one entry per phase, when the scenario changes the origin: the
	// summary's one figure averages phases of different capacity, which
	// hides how a policy did in each.
	Phases []Phase `json:"phases,omitempty"`
	// Series is the run cut into intervals of IntervalS seconds.
	Series []Point `json:"series"`
}

// Phase is a policy's goodput over one stretch of the run in which the
// origin did not change (from the series, so it includes the time a
// policy takes to adapt after the change that opens the phase).
type Phase struct {
	FromS       float64 `json:"from_s"`
	ToS         float64 `json:"to_s"`
	GoodputRPS  float64 `json:"goodput_rps"`
	CapacityRPS float64 `json:"capacity_rps"`
	GoodputPct  float64 `json:"goodput_pct_of_capacity"`
	// DemandRPS, AchievableRPS and GoodputPctOfAchievable are the phase's
	// as in Summary.
	DemandRPS              float64 `json:"demand_rps"`
	AchievableRPS          float64 `json:"achievable_rps"`
	GoodputPctOfAchievable float64 `json:"goodput_pct_of_achievable"`
}

// Summary is one policy's figures over the measured window (after the
// scenario's warm-up).
type Summary struct {
	// OfferedRPS is the rate of attempts the clients sent (retries
	// included).
	OfferedRPS float64 `json:"offered_rps"`
	// GoodputRPS is successes within the client's timeout per second: the
	// headline figure.
	GoodputRPS float64 `json:"goodput_rps"`
	// ThroughputRPS is requests the origin completed per second, useful or
	// not (a response the client had stopped waiting for counts here).
	ThroughputRPS float64 `json:"throughput_rps"`
	// CapacityRPS is the origin's capacity by Little's law (workers / mean
	// service time), time-averaged when the origin changes during the run.
	CapacityRPS float64 `json:"capacity_rps"`
	// GoodputPct is GoodputRPS as a percentage of CapacityRPS. A policy
	// that served everything offered below capacity reads less than 100%
	// here: GoodputPctOfAchievable is the figure to compare policies by.
	GoodputPct float64 `json:"goodput_pct_of_capacity"`
	// DemandRPS is the clients' requests per second: first attempts due,
	// sent or not (retries excluded, requests left unsent for want of a
	// client worker included).
	DemandRPS float64 `json:"demand_rps"`
	// AchievableRPS is the most goodput any policy could have had: the
	// demand served oldest first at the capacity of the moment, each
	// request lost at its client's deadline (sim.Summary.Achievable), so
	// that overload in one phase and spare capacity in another do not
	// cancel out, and a burst the clients wait for counts as served in
	// the lull after it. GoodputPctOfAchievable is GoodputRPS as a
	// percentage of it: the headline.
	AchievableRPS          float64 `json:"achievable_rps"`
	GoodputPctOfAchievable float64 `json:"goodput_pct_of_achievable"`

	// Sent counts attempts sent (retries included); Unsent requests not
	// sent because every client worker was busy; Successes responses within
	// the client's timeout; Failed attempts that ended otherwise (rejected,
	// refused, timed out; those still waiting at the end are neither);
	// Timeouts requests the client gave up on;
	// Refused requests the origin refused (queue full); OriginTimeouts
	// requests the origin answered with its own timeout; Retries retry
	// attempts; Wasted origin completions whose client had already gone.
	// SucceededBySend counts the requests first sent in the window that
	// succeeded, however long after the end the answer came (a load
	// generator's count, by intended send time; the simulator follows the
	// requests still out at the end to their answers for it): real and
	// simulated runs are compared on it.
	Sent            int64 `json:"sent"`
	Unsent          int64 `json:"unsent"`
	Successes       int64 `json:"successes"`
	SucceededBySend int64 `json:"succeeded_by_send"`
	Failed          int64 `json:"failed"`
	Timeouts        int64 `json:"timeouts"`
	Refused         int64 `json:"refused"`
	OriginTimeouts  int64 `json:"origin_timeouts"`
	Retries         int64 `json:"retries"`
	Wasted          int64 `json:"wasted"`

	// Rejected counts the policy's rejections by reason, keyed by the
	// reason's label (sluice.Reason.String: "limit", "queue_full", ...).
	// Reasons with no rejection are absent; the map is never null.
	Rejected map[string]int64 `json:"rejected"`
	// RejectedTotal is the sum of Rejected.
	RejectedTotal int64 `json:"rejected_total"`

	// Success is the latency of successes, from the intended send time.
	Success Latency `json:"success_latency_ms"`
	// Rejection is the latency of rejections: how fast the policy said no.
	Rejection Latency `json:"rejection_latency_ms"`
	// RejectionAtServer is the latency of the policy's rejections from the
	// request's arrival at the server to its answer: how fast the policy
	// itself said no, without the network and the client's own lag. Real
	// runs only.
	RejectionAtServer *Latency `json:"rejection_at_server_ms,omitempty"`
	// Wait is how long admitted requests waited in the policy's queue.
	Wait Latency `json:"wait_ms"`
	// MeanLatencyMs is the mean latency of successes; MeanWaitMs the mean
	// time from the intended send to the start of service, in the policy's
	// queue and the origin's together, of the requests served.
	MeanLatencyMs float64 `json:"mean_latency_ms"`
	MeanWaitMs    float64 `json:"mean_wait_ms"`

	// Late counts sends that left more than the load generator's
	// tolerance after their intended time, and SendLag is how late sends
	// left: present for real runs only (the simulator is never late). A
	// run with late sends measured its machine as well as its policy.
	Late    int64    `json:"late,omitempty"`
	SendLag *Latency `json:"send_lag_ms,omitempty"`

	// Within is present when the scenario asks for it (report.within).
	Within *Within `json:"within,omitempty"`
}

// Within counts requests served within a latency bound (seed 001's "served
// within 1 s").
type Within struct {
	// BoundMs is the bound, in milliseconds.
	BoundMs float64 `json:"bound_ms"`
	// Successes counts successes whose latency was at most the bound.
	Successes int64 `json:"successes"`
	// Admitted counts requests admitted after waiting at most the bound.
	Admitted int64 `json:"admitted"`
}

// Latency holds percentiles in milliseconds; all are 0 when there was no
// sample (Count is 0).
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Point is one interval of a policy's run. Rates are per second over the
// interval; latencies are of the successes that completed in it; gauges
// (limit, in flight, queued, origin) are sampled at its end.
type Point struct {
	// TS is the end of the interval, in seconds since the start.
	TS            float64 `json:"t_s"`
	OfferedRPS    float64 `json:"offered_rps"`
	GoodputRPS    float64 `json:"goodput_rps"`
	ThroughputRPS float64 `json:"throughput_rps"`
	// RejectedRPS counts policy rejections and origin refusals: in the
	// simulator's series when they happened, in the load generator's (as
	// its every figure) by the request's intended send time.
	RejectedRPS float64 `json:"rejected_rps"`
	// RejectedBySendRPS counts the same by the request's send time,
	// however much later it was turned away: the load generator's
	// RejectedRPS, and what the simulator's is once a queue holds
	// requests through a change (those sent in an overload and evicted
	// after it count in the overload).
	RejectedBySendRPS float64 `json:"rejected_by_send_rps"`
	// RejectedByRPS is the policy's rejections per second by reason (the
	// labels of Summary.Rejected); absent when there were none.
	RejectedByRPS map[string]float64 `json:"rejected_by_reason_rps,omitempty"`
	TimeoutsRPS   float64            `json:"timeouts_rps"`
	// CapacityRPS is the origin's capacity averaged over the interval;
	// DemandRPS the first attempts due in it per second, sent or not.
	CapacityRPS float64 `json:"capacity_rps"`
	DemandRPS   float64 `json:"demand_rps"`
	// AchievableRPS is what of the demand a server of the capacity could
	// have served in the interval (simulator only; see
	// Summary.AchievableRPS).
	AchievableRPS float64 `json:"achievable_rps,omitempty"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	// P95Ms is present when the run measured it per interval (the lab's
	// load generator does; the simulator's series has p50 and p99).
	P95Ms float64 `json:"p95_ms,omitempty"`
	// AdmittedP50Ms is the successes' p50 from their admission to their
	// answer (the origin's queue and service, without the wait in the
	// policy's queue); present from the simulator, which sees admission.
	AdmittedP50Ms float64 `json:"admitted_p50_ms,omitempty"`
	// Limit is the policy's limit (requests in flight, or per second for a
	// rate limit; 0 when there is none); InFlight the requests it admitted
	// and has not released; Queued those waiting in it.
	Limit    float64 `json:"limit"`
	InFlight int     `json:"in_flight"`
	Queued   int     `json:"queued"`
	// OriginBusy and OriginQueue are the origin's busy workers and queue
	// length.
	OriginBusy  int `json:"origin_busy"`
	OriginQueue int `json:"origin_queue"`
}

// JSON writes v (a *Report, or the lab's result that holds reports) as
// indented JSON followed by a newline. Characters that are not printable
// (a bidirectional-text control in a name, say) are written as \u
// escapes, which decode to the same string, so that the output is safe to
// print on a terminal.
func JSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(buf.Bytes()))
	return err
}

// escapeJSON rewrites the non-printable characters of encoded JSON as \u
// escapes. Outside strings JSON is printable ASCII and whitespace, so only
// string contents change. (encoding/json already escapes control
// characters below U+0020 and invalid UTF-8.)
func escapeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == '\n' || unicode.IsPrint(r) || r == utf8.RuneError {
			out = append(out, b[:n]...)
		} else {
			for _, u := range utf16.Encode([]rune{r}) {
				out = fmt.Appendf(out, "\\u%04x", u)
			}
		}
		b = b[n:]
	}
	return out
}
