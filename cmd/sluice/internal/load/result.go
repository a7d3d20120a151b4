package load

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what a Run measured. Counts cover the requests whose intended
// send time is in the measured window, from Warmup to Duration; rates are
// per second of that window. Series covers the whole run.
type Result struct {
	URL      string        `json:"url"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"` // the schedule, TimeScale applied
	Warmup   time.Duration `json:"warmup"`
	Timeout  time.Duration `json:"timeout"` // the client's, from the intended send time; 0: none
	Clients  int           `json:"clients"`
	// Interrupted is true when the run's context ended it early.
	Interrupted bool `json:"interrupted,omitempty"`
	// Stopped, when the run was interrupted mid-schedule, is where the
	// schedule stopped (the intended send time of the first request not
	// planned): the rates are then per second of the window from Warmup
	// to Stopped, and the series ends there.
	Stopped time.Duration `json:"stopped,omitempty"`

	// Goodput is 2xx responses within Timeout per second: the headline.
	Goodput float64 `json:"goodput"`
	// Offered is the schedule's rate: planned sends per second.
	Offered float64 `json:"offered"`
	// Throughput is responses (any status) per second.
	Throughput float64 `json:"throughput"`

	// Keeping the schedule. Planned = Sent + Skipped. A request is Sent
	// when it is handed to a client worker at its intended time; it may
	// then wait for a free connection (Config.Connections), which its
	// latency shows. A send is Skipped when ClientWorkers requests were
	// outstanding, or when it was already past its Timeout when its turn
	// came; it is Late when it left more than LateAfter behind its
	// intended time. SendLag is how far behind the sends left.
	Planned int64       `json:"planned"`
	Sent    int64       `json:"sent"`
	Skipped int64       `json:"skipped"`
	Late    int64       `json:"late"`
	SendLag Percentiles `json:"send_lag"`
	// LateAfter is the lag past which a send counted as Late.
	LateAfter time.Duration `json:"late_after"`

	// Outcomes of the sent requests. Good ⊆ OK (2xx); Rejected are 429
	// and 503 answers, and any answer carrying ReasonHeader; Failed are
	// the other statuses and the transport errors (timeouts included);
	// Unfinished were cancelled at the end of the run (no Timeout, Drain
	// passed) or by an interruption.
	OK         int64 `json:"ok"`
	Good       int64 `json:"good"`
	Rejected   int64 `json:"rejected"`
	Failed     int64 `json:"failed"`
	Unfinished int64 `json:"unfinished"`
	// Status counts responses by status code; Reasons counts rejections
	// by ReasonHeader ("" when the answer had none; at most 64 reasons of
	// at most 64 bytes, cut at a character, bytes that are not UTF-8
	// written U+FFFD, the rest counted as "(other)"); Errors counts
	// transport errors by kind: "timeout" (the client's deadline),
	// "refused", "reset", "eof", "other".
	Status  map[int]int64    `json:"status"`
	Reasons map[string]int64 `json:"reasons"`
	Errors  map[string]int64 `json:"errors"`

	// Latencies, from the intended send time: of every answered request
	// (timeouts at the time they gave up), of 2xx, of rejections, of
	// failures.
	Latency   Percentiles `json:"latency"`
	Success   Percentiles `json:"success"`
	Rejection Percentiles `json:"rejection"`
	Failure   Percentiles `json:"failure"`

	// Series has one Point per Interval of intended send time.
	Series []Point `json:"series"`
}

// Percentiles of a latency distribution (HdrHistogram, 3 significant
// digits, microsecond resolution). Zero when there were no samples.
type Percentiles struct {
	Count int64         `json:"count"`
	Mean  time.Duration `json:"mean"`
	P50   time.Duration `json:"p50"`
	P90   time.Duration `json:"p90"`
	P95   time.Duration `json:"p95"`
	P99   time.Duration `json:"p99"`
	P999  time.Duration `json:"p999"`
	Max   time.Duration `json:"max"`
}

// Point is one interval of the series: the requests whose intended send
// time fell in [T-Interval, T), with rates per second of the interval.
type Point struct {
	T          time.Duration `json:"t"`
	Offered    float64       `json:"offered"`    // planned sends per second
	Sent       float64       `json:"sent"`       // sends per second
	Goodput    float64       `json:"goodput"`    // 2xx within Timeout per second
	Throughput float64       `json:"throughput"` // responses per second
	Rejects    float64       `json:"rejects"`    // rejections per second
	Failures   float64       `json:"failures"`   // failures per second (timeouts included)
	Timeouts   float64       `json:"timeouts"`   // client timeouts per second
	Skipped    int64         `json:"skipped"`
	Late       int64         `json:"late"`
	P50        time.Duration `json:"p50"` // of the interval's 2xx
	P95        time.Duration `json:"p95"`
	P99        time.Duration `json:"p99"`
}

// Histogram bounds, in microseconds: 1 µs to 1 h.
const (
	histMin    = 1
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist(digits int) *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, digits) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(d.Microseconds(), histMin), histMax))
}

func percentiles(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Percentiles{
		Count: h.TotalCount(),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P95:   us(h.ValueAtQuantile(95)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}
