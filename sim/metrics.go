package sim

import (
	"sort"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/sluicehq/sluice"
)

// The counters a run keeps, per interval and over the measured window.
const (
	cDue = iota // first attempts due, sent or not: the demand
	cSent
	cUnsent
	cSuccess
	cCompleted
	cWasted
	cTimeout
	cRefused
	cOriginTimeout
	cRetry
	cRejected
	// cFailed counts attempts the client saw fail, once each: an attempt
	// the client gave up on may still be refused or timed out at the
	// origin afterwards, which Refused and OriginTimeouts count.
	cFailed
	nCounters
)

type tally struct {
	n       [nCounters]int64
	rejects [sluice.NumReasons]int64
	// rejectedSent counts the requests sent in the interval that were
	// rejected or refused since (see Point.RejectedSent).
	rejectedSent int64
}

// Histograms record microseconds from 1 µs to an hour with 3 significant
// digits (0.1% precision); longer values are recorded as an hour.
const (
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, histDigits) }

func record(h *hdrhistogram.Histogram, ns int64) {
	us := ns / 1000
	if us > histMax {
		us = histMax
	}
	_ = h.RecordValue(max(us, 0)) // cannot fail: the value is within range
}

// metrics accumulates one policy's figures: counters and latencies for the
// current interval (emptied at each tick) and for the measured window.
type metrics struct {
	// The measured window is [warmup, end), half-open like a Point's
	// interval: an event at exactly end (a completion, a deadline) is
	// outside it, as it is outside the series' last Point. Counting both
	// ends let in the answers at end, which no Point holds, and goodput
	// could exceed capacity. The drain's events, all after end, are outside
	// too.
	warmup, end int64

	cur, tot tally
	curLat   *hdrhistogram.Histogram // successes in the current interval
	curAdm   *hdrhistogram.Histogram // the same, from their admission
	lat      *hdrhistogram.Histogram // successes, measured window
	rejLat   *hdrhistogram.Histogram // rejections, measured window
	wait     *hdrhistogram.Histogram // admission waits, measured window
	points   []Point
	lastTick int64

	// capacity integrals, for Summary.Capacity (over the measured window)
	// and Point.Capacity (over the interval): an interval in which the
	// origin changed gets the time-weighted mean, not the value at its end.
	capNow  float64
	capFrom int64
	capArea float64
	curCap  float64 // the integral over the current interval
	// ach serves the demand at the capacity (see oracle); achCur and
	// achTot are what it served in the current interval and in the
	// measured window, up to achAt.
	ach            oracle
	achCur, achTot float64
	achAt          int64

	// sums of nanoseconds for the means, over the measured window: latency
	// of successes, and wait before service (the policy's queue and the
	// origin's). Floats, because an int64 sum of 10 million long waits
	// could overflow.
	latSum, waitSum float64
	waitN           int64
}

func newMetrics(warmup, end, timeout int64, npoints int) metrics {
	return metrics{
		warmup: warmup, end: end, ach: newOracle(timeout),
		curLat: newHist(), curAdm: newHist(), lat: newHist(), rejLat: newHist(), wait: newHist(),
		points: make([]Point, 0, npoints),
	}
}

// measured reports whether an event at now is in the measured window.
func (m *metrics) measured(now int64) bool { return now >= m.warmup && now < m.end }

func (m *metrics) inc(now int64, c int) {
	m.cur.n[c]++
	if m.measured(now) {
		m.tot.n[c]++
	}
}

// success notes a success latency after its request's intended send,
// served after the policy admitted it.
func (m *metrics) success(now, latency, served int64) {
	m.inc(now, cSuccess)
	record(m.curLat, latency)
	record(m.curAdm, served)
	if m.measured(now) {
		record(m.lat, latency)
		m.latSum += float64(latency)
	}
}

// served notes a request that starts service at the origin now, wait after
// it was sent.
func (m *metrics) served(now, wait int64) {
	if m.measured(now) {
		m.waitSum += float64(wait)
		m.waitN++
	}
}

func (m *metrics) reject(now int64, r sluice.Reason, latency int64) {
	m.inc(now, cRejected)
	m.rejectedSent(now - latency)
	m.cur.rejects[r]++
	if m.measured(now) {
		m.tot.rejects[r]++
		record(m.rejLat, latency)
	}
}

// rejectedSent counts a rejection or refusal of a request sent at sent in
// the interval it was sent in: the current one, or a closed Point, whose
// rate it then raises by one request over that Point's interval. Those
// turned away after the end (drain) count too, as bySend's answers do.
func (m *metrics) rejectedSent(sent int64) {
	if sent >= m.lastTick || len(m.points) == 0 {
		m.cur.rejectedSent++
		return
	}
	// A Point holds [its start, T): the first whose T is past sent.
	i := sort.Search(len(m.points), func(i int) bool { return int64(m.points[i].T) > sent })
	from := int64(0)
	if i > 0 {
		from = int64(m.points[i-1].T)
	}
	m.points[i].RejectedSent += 1e9 / float64(int64(m.points[i].T)-from)
}

func (m *metrics) admitted(now, wait int64) {
	if m.measured(now) {
		record(m.wait, wait)
	}
}

// capacity notes that the origin's capacity is c from now on.
func (m *metrics) capacity(now int64, c float64) {
	m.closeCap(now)
	m.capNow = c
	m.credit(now)
	m.ach.setRate(now, c)
}

// due notes a first attempt due now, sent or not: the demand.
func (m *metrics) due(now int64) {
	m.inc(now, cDue)
	m.credit(now)
	m.ach.due(now)
}

// credit adds what the oracle served up to now to the interval and, the
// part in it, to the measured window.
func (m *metrics) credit(now int64) {
	for _, b := range [...]int64{m.warmup, m.end, now} {
		if b <= m.achAt || b > now {
			continue
		}
		s := m.ach.take(b)
		m.achCur += s
		if m.achAt >= m.warmup && b <= m.end {
			m.achTot += s
		}
		m.achAt = b
	}
}

func (m *metrics) closeCap(now int64) {
	if now > m.capFrom {
		m.curCap += m.capNow * float64(now-m.capFrom)
	}
	if from := max(m.capFrom, m.warmup); now > from {
		m.capArea += m.capNow * float64(now-from) / 1e9
	}
	m.capFrom = now
}

// tick closes the interval ending at now into a Point; gauges are filled in
// by the caller.
func (m *metrics) tick(now int64) *Point {
	sec := float64(now-m.lastTick) / 1e9
	c := &m.cur
	m.closeCap(now)
	p := Point{
		T:          time.Duration(now),
		Offered:    float64(c.n[cSent]) / sec,
		Goodput:    float64(c.n[cSuccess]) / sec,
		Throughput: float64(c.n[cCompleted]) / sec,
		Rejects:    float64(c.n[cRejected]+c.n[cRefused]) / sec,
		// Raised later for those of its requests rejected after T.
		RejectedSent: float64(c.rejectedSent) / sec,
		Timeouts:     float64(c.n[cTimeout]) / sec,
		Demand:       float64(c.n[cDue]) / sec,
		Capacity:     m.curCap / float64(now-m.lastTick),
	}
	m.curCap = 0
	m.credit(now)
	p.Achievable, m.achCur = m.achCur/sec, 0
	if c.n[cRejected] > 0 {
		p.RejectsBy = make(map[string]float64)
		for r, n := range c.rejects {
			if n > 0 {
				p.RejectsBy[sluice.Reason(r).String()] = float64(n) / sec
			}
		}
	}
	if m.curLat.TotalCount() > 0 {
		p.P50 = time.Duration(m.curLat.ValueAtQuantile(50)) * time.Microsecond
		p.P99 = time.Duration(m.curLat.ValueAtQuantile(99)) * time.Microsecond
		m.curLat.Reset()
		p.AdmittedP50 = time.Duration(m.curAdm.ValueAtQuantile(50)) * time.Microsecond
		m.curAdm.Reset()
	}
	*c = tally{}
	m.lastTick = now
	m.points = append(m.points, p)
	return &m.points[len(m.points)-1]
}

func (m *metrics) summary() Summary {
	m.closeCap(m.end)
	m.credit(m.end)
	sec := float64(m.end-m.warmup) / 1e9
	t := &m.tot
	s := Summary{
		Sent:           t.n[cSent],
		Unsent:         t.n[cUnsent],
		Successes:      t.n[cSuccess],
		Failed:         t.n[cFailed],
		Goodput:        float64(t.n[cSuccess]) / sec,
		Throughput:     float64(t.n[cCompleted]) / sec,
		Demand:         float64(t.n[cDue]) / sec,
		Capacity:       m.capArea / sec,
		Achievable:     m.achTot / sec,
		Rejects:        map[string]int64{},
		Refused:        t.n[cRefused],
		OriginTimeouts: t.n[cOriginTimeout],
		Timeouts:       t.n[cTimeout],
		Retries:        t.n[cRetry],
		Wasted:         t.n[cWasted],
		Latency:        percentiles(m.lat),
		RejectLatency:  percentiles(m.rejLat),
		Wait:           percentiles(m.wait),
	}
	if t.n[cSuccess] > 0 {
		s.MeanLatency = time.Duration(m.latSum / float64(t.n[cSuccess]))
	}
	if m.waitN > 0 {
		s.MeanWait = time.Duration(m.waitSum / float64(m.waitN))
	}
	for r, n := range t.rejects {
		if n > 0 {
			s.Rejects[sluice.Reason(r).String()] = n
		}
	}
	return s
}

func percentiles(h *hdrhistogram.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Percentiles{
		Count: h.TotalCount(),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}
