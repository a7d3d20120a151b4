package load

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// recorder accumulates a run's events. Every event carries the request's
// intended send time as an offset from the start (off), which places it in
// the summary window and in the series; responses also carry their
// completion offset, for the throughput. It is safe for concurrent use.
type recorder struct {
	mu       sync.Mutex
	cfg      *Config
	res      Result
	lat      *hdrhistogram.Histogram
	ok       *hdrhistogram.Histogram
	rej      *hdrhistogram.Histogram
	fail     *hdrhistogram.Histogram
	lag      *hdrhistogram.Histogram
	pts      []acc
	finished int64 // responses completed inside the window (for Throughput)
	// completions counts responses by the interval they completed in
	// (Point.Throughput), where everything else goes by intended time.
	completions []int64
}

// acc is one interval of the series while the run goes on.
type acc struct {
	planned, sent, good, rej, fail, tmo, skipped, late int64
	ok                                                 *hdrhistogram.Histogram // 2 digits: one per interval
}

func newRecorder(c *Config) *recorder {
	n := int((c.Duration + c.Interval - 1) / c.Interval)
	return &recorder{
		cfg: c,
		res: Result{
			Status: map[int]int64{}, Reasons: map[string]int64{}, Errors: map[string]int64{},
		},
		lat: newHist(histDigits), ok: newHist(histDigits), rej: newHist(histDigits),
		fail: newHist(histDigits), lag: newHist(histDigits),
		pts: make([]acc, n), completions: make([]int64, n),
	}
}

func (r *recorder) measured(off time.Duration) bool {
	return off >= r.cfg.Warmup && off < r.cfg.Duration
}

func (r *recorder) point(off time.Duration) *acc {
	i := min(max(int(off/r.cfg.Interval), 0), len(r.pts)-1)
	return &r.pts[i]
}

// skipped counts a planned request that was not sent.
func (r *recorder) skipped(off time.Duration) {
	r.mu.Lock()
	p := r.point(off)
	p.planned++
	p.skipped++
	if r.measured(off) {
		r.res.Planned++
		r.res.Skipped++
	}
	r.mu.Unlock()
}

// sent counts a planned request sent lag after its intended time.
func (r *recorder) sent(off, lag time.Duration) {
	late := lag > r.cfg.LateAfter
	r.mu.Lock()
	p := r.point(off)
	p.planned++
	p.sent++
	if late {
		p.late++
	}
	if r.measured(off) {
		r.res.Planned++
		r.res.Sent++
		record(r.lag, lag)
		if late {
			r.res.Late++
		}
	}
	r.mu.Unlock()
}

// outcome is how one sent request ended.
type outcome struct {
	code   int    // the status; 0 for a transport error
	reason string // ReasonHeader's value
	err    string // the transport error's kind; "" for a response
	lat    time.Duration
	end    time.Duration // completion, as an offset from the start
}

// unfinished is outcome.err for a request cancelled by the end of the run.
const unfinished = "unfinished"

func (r *recorder) done(off time.Duration, o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o.code != 0 {
		if r.measured(o.end) {
			r.finished++
		}
		if i := int(o.end / r.cfg.Interval); o.end < r.cfg.Duration {
			r.completions[i]++
		}
	}
	p := r.point(off)
	in := r.measured(off)
	res := &r.res
	if o.err == unfinished {
		if in {
			res.Unfinished++
		}
		return
	}
	var kind *hdrhistogram.Histogram
	switch {
	case o.code >= 200 && o.code < 300:
		kind = r.ok
		good := r.cfg.Timeout == 0 || o.lat <= r.cfg.Timeout
		if good {
			p.good++
		}
		if p.ok == nil {
			p.ok = newHist(2)
		}
		record(p.ok, o.lat)
		if in {
			res.OK++
			if good {
				res.Good++
			}
		}
	case o.reason != "" || o.code == 429 || o.code == 503:
		kind = r.rej
		p.rej++
		if in {
			res.Rejected++
			res.Reasons[r.reasonKey(o.reason)]++
		}
	default:
		kind = r.fail
		p.fail++
		if o.err == "timeout" {
			p.tmo++
		}
		if in {
			res.Failed++
			if o.err != "" {
				res.Errors[o.err]++
			}
		}
	}
	if o.code != 0 && in {
		res.Status[o.code]++
	}
	if in {
		record(r.lat, o.lat)
		record(kind, o.lat)
	}
}

// The reasons come from the server: a cap on their number and length
// keeps a server that writes a new one each time from growing the map.
const (
	maxReasons   = 64
	maxReasonLen = 64
	otherReasons = "(other)"
)

// reasonKey is the Reasons key for reason. r.mu is held.
//
// A key is valid UTF-8, cut at a character's boundary: JSON writes each
// invalid byte as U+FFFD, so two keys that differ only there (two
// characters cut through, or a server's bytes that are not UTF-8) came
// out as one name twice, and a reader kept one count.
func (r *recorder) reasonKey(reason string) string {
	reason = cutRunes(reason, maxReasonLen)
	if !utf8.ValidString(reason) {
		reason = cutRunes(strings.ToValidUTF8(reason, string(utf8.RuneError)), maxReasonLen)
	}
	if _, ok := r.res.Reasons[reason]; !ok && len(r.res.Reasons) >= maxReasons-1 {
		return otherReasons
	}
	return reason
}

// cutRunes cuts s to at most n bytes, not through a UTF-8 character.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Back up to the first byte of the character at n; a longer run of
	// continuation bytes is not UTF-8, and any cut in it will do.
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}

// progress returns the counts so far over the whole run, for the progress
// line.
func (r *recorder) progress() (sent, good, rej, fail int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.pts {
		p := &r.pts[i]
		sent += p.sent
		good += p.good
		rej += p.rej
		fail += p.fail
	}
	return
}

// result completes the Result; call it once every request has ended. The
// schedule ran up to end (Duration, or where an interruption stopped it):
// the rates are per second of the window up to end, and the series stops
// there.
func (r *recorder) result(end time.Duration) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	c := r.cfg
	end = min(end, c.Duration)
	res.Duration, res.Warmup, res.Timeout, res.Clients = c.Duration, c.Warmup, c.Timeout, c.Clients
	res.LateAfter = c.LateAfter
	if window := (end - c.Warmup).Seconds(); window > 0 { // stopped in the warm-up: nothing measured
		res.Goodput = float64(res.Good) / window
		res.Offered = float64(res.Planned) / window
		res.Throughput = float64(r.finished) / window
	}
	res.SendLag = percentiles(r.lag)
	res.Latency = percentiles(r.lat)
	res.Success = percentiles(r.ok)
	res.Rejection = percentiles(r.rej)
	res.Failure = percentiles(r.fail)
	n := min(int((end+c.Interval-1)/c.Interval), len(r.pts))
	res.Series = make([]Point, n)
	for i := range n {
		p := &r.pts[i]
		w := (min(time.Duration(i+1)*c.Interval, end) - time.Duration(i)*c.Interval).Seconds()
		pt := Point{
			T:        time.Duration(i+1) * c.Interval,
			Offered:  float64(p.planned) / w,
			Sent:     float64(p.sent) / w,
			Goodput:  float64(p.good) / w,
			Rejects:  float64(p.rej) / w,
			Failures: float64(p.fail) / w,
			Timeouts: float64(p.tmo) / w,
			Skipped:  p.skipped,
			Late:     p.late,
		}
		if p.ok != nil {
			q := percentiles(p.ok)
			pt.P50, pt.P95, pt.P99 = q.P50, q.P95, q.P99
		}
		res.Series[i] = pt
	}
	for i, n := range r.completions[:n] {
		w := (min(time.Duration(i+1)*c.Interval, end) - time.Duration(i)*c.Interval).Seconds()
		res.Series[i].Throughput = float64(n) / w
	}
	return &res
}
