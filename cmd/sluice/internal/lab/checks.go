package lab

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// The seeds' claims, as checks of a run. Each runs on the real report when
// there is one and on the simulator's, and says which in its name: the bars
// of issue 9 are for real sockets; the simulator's rows show the model
// holds the same claim.

// side is one report of an experiment, named for the check's label.
type side struct {
	name string
	r    *report.Report
}

func sides(x *ExperimentResult) []side {
	var out []side
	if x.Real != nil {
		out = append(out, side{"real", x.Real})
	}
	if x.Sim != nil {
		out = append(out, side{"sim", x.Sim})
	}
	return out
}

// window averages a series field over the points that end in (from, to].
func window(p *report.Policy, from, to float64, f func(report.Point) float64) float64 {
	return windowOf(p, from, to, func(pt report.Point) (float64, bool) { return f(pt), true })
}

// p50Window averages the intervals' success p50 over the points that end
// in (from, to] and had successes: an interval without one has a p50 of
// 0, not a figure, and throughput counts rejections and late answers.
func p50Window(p *report.Policy, from, to float64) float64 {
	return windowOf(p, from, to, func(pt report.Point) (float64, bool) { return pt.P50Ms, pt.P50Ms > 0 })
}

// windowOf averages f over the points that end in (from, to] for which it
// reports a value.
func windowOf(p *report.Policy, from, to float64, f func(report.Point) (float64, bool)) float64 {
	var sum float64
	n := 0
	for _, pt := range p.Series {
		if pt.TS <= from+1e-9 || pt.TS > to+1e-9 {
			continue
		}
		if v, ok := f(pt); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func goodput(pt report.Point) float64  { return pt.GoodputRPS }
func offered(pt report.Point) float64  { return pt.OfferedRPS }
func capacity(pt report.Point) float64 { return pt.CapacityRPS }

// checks003: seed 003's slowdown. The bar: from 30 s (scaled) after the
// change to the end of the slow phase, adaptive goodput >= 90% of
// min(offered, capacity); static-5 about 2.3 rps (scaled), none about 0.
// Sluice's recommended limit (issue 12): goodput >= 95%, at most 1.25 ×
// the origin's 7 workers in flight, and its successes' p50 from the send
// at most 1.3 × the slow service's 2 s (scaled).
func checks003(x *ExperimentResult) []Check {
	k := x.TimeScale
	from, to := 90*k, 180*k
	var out []Check
	for _, s := range sides(x) {
		simCap := policy(x.Sim, "none")
		if simCap == nil && len(x.Sim.Policies) > 0 {
			simCap = &x.Sim.Policies[0]
		}
		capRPS := window(simCap, from, to, capacity)
		for _, name := range []string{"recommended", "adaptive", "static-5", "none"} {
			p := policy(s.r, name)
			if p == nil {
				continue // a file run on its own may not have it
			}
			g := window(p, from, to, goodput)
			achievable := math.Min(window(p, from, to, offered), capRPS)
			label := fmt.Sprintf("%s goodput from %gs to %gs, slow phase (%s)", name, from, to, s.name)
			switch name {
			case "recommended":
				out = append(out, Check{Name: label,
					Want: fmt.Sprintf(">= 95%% of achievable %.2f rps", achievable),
					Got:  fmt.Sprintf("%.2f rps = %.1f%%", g, pct(g, achievable)),
					Held: g >= 0.95*achievable && achievable > 0})
				// The file's origin: 7 workers, 2 s of work in the slow
				// phase (as static-5's 2.2 s above, written here).
				const workers = 7
				inFlight := window(p, from, to, func(pt report.Point) float64 { return float64(pt.InFlight) })
				out = append(out, Check{Name: fmt.Sprintf("%s in flight from %gs to %gs (%s)", name, from, to, s.name),
					Want: fmt.Sprintf("<= 1.25 × the %d workers", workers),
					Got:  fmt.Sprintf("%.2f = %.2f×", inFlight, inFlight/workers),
					Held: inFlight > 0 && inFlight <= 1.25*workers})
				p50, work := p50Window(p, from, to), 2000*k
				out = append(out, Check{Name: fmt.Sprintf("%s success p50 from the send (mean of the intervals'), from %gs to %gs (%s)", name, from, to, s.name),
					Want: fmt.Sprintf("<= 1.3 × the %.0f ms of work", work),
					Got:  fmt.Sprintf("%.0f ms = %.2f×", p50, p50/work),
					Held: p50 > 0 && p50 <= 1.3*work})
			case "adaptive":
				out = append(out, Check{Name: label,
					Want: fmt.Sprintf(">= 90%% of achievable %.2f rps", achievable),
					Got:  fmt.Sprintf("%.2f rps = %.1f%%", g, pct(g, achievable)),
					Held: g >= 0.9*achievable && achievable > 0})
			case "static-5":
				// Little's law would give 5 / 2 s = 2.5 rps, but a slot
				// freed as a request is due idles until the next arrival,
				// 200 ms later: 5 / 2.2 s = 2.27; the seed measured 2.3.
				lo, hi := 0.95*5/2.2/k, 1.05*2.3/k
				out = append(out, Check{Name: label,
					Want: fmt.Sprintf("%.2f-%.2f rps (5 / 2.2 s to the seed's 2.3, ±5%%, scaled)", lo, hi),
					Got:  fmt.Sprintf("%.2f rps", g),
					Held: g >= lo && g <= hi})
			case "none":
				out = append(out, Check{Name: label,
					Want: fmt.Sprintf("≈ 0: < 10%% of achievable %.2f rps", achievable),
					Got:  fmt.Sprintf("%.2f rps", g),
					Held: g < 0.1*achievable})
			}
		}
	}
	return out
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

// checks000: seed 000's ramp. The bar: token bucket + 75 ms keeps the
// successes' p99 (stronger than the seed's p95) <= 275 ms at every offered
// rate and answers its failures with p99 < 1 ms.
func checks000(x *ExperimentResult) []Check {
	var out []Check
	for _, s := range sides(x) {
		p := policy(s.r, "token-bucket+75ms")
		if p == nil {
			continue
		}
		// The real series has each interval's p95, the SLA's figure; the
		// simulator's has p99, a stricter one.
		q := "p95"
		val := func(pt report.Point) float64 { return pt.P95Ms }
		if s.name == "sim" {
			q, val = "p99", func(pt report.Point) float64 { return pt.P99Ms }
		}
		worst, at := 0.0, 0.0
		for _, pt := range p.Series {
			if pt.GoodputRPS > 0 && val(pt) > worst {
				worst, at = val(pt), pt.OfferedRPS
			}
		}
		out = append(out, Check{
			Name: fmt.Sprintf("token-bucket+75ms: success %s in every interval of the ramp (%s)", q, s.name),
			Want: "<= 275 ms (the SLA: p95 <= 275 ms)",
			Got:  fmt.Sprintf("worst %.1f ms, at %.0f rps offered", worst, at),
			Held: worst <= 275 && worst > 0,
		})
		// The policy's own answer time: at the server on sockets (from
		// the request's arrival), in virtual time in the simulator. The
		// client's view, which adds the network and the generator's lag,
		// is in the summary.
		rej, where := p.Summary.Rejection, "from the intended send time"
		if p.Summary.RejectionAtServer != nil {
			rej, where = *p.Summary.RejectionAtServer, "at the server, from arrival"
		}
		out = append(out, Check{
			Name: fmt.Sprintf("token-bucket+75ms: failures answered, %s (%s)", where, s.name),
			Want: "p99 < 1 ms",
			Got:  fmt.Sprintf("p99 %.3f ms over %d rejections (clients saw p99 %.3f ms)", rej.P99, rej.Count, p.Summary.Rejection.P99),
			Held: rej.Count > 0 && rej.P99 < 1,
		})
		if t := policy(s.r, "ticker+75ms"); t != nil {
			out = append(out, Check{
				Name: fmt.Sprintf("ticker+75ms: failures take the whole wait (%s)", s.name),
				Want: "p50 >= 75 ms (the seed: exactly 75 ms)",
				Got:  fmt.Sprintf("p50 %.1f ms over %d rejections", t.Summary.Rejection.P50, t.Summary.Rejection.Count),
				Held: t.Summary.Rejection.Count > 0 && t.Summary.Rejection.P50 >= 74.5,
			})
		}
	}
	return out
}

// checks001: seed 001's bursts: LIFO serves more within 1 s than FIFO, and
// CoDel (on the workload's time scale) at least as many.
func checks001(x *ExperimentResult) []Check {
	var out []Check
	within := func(p *report.Policy) int64 {
		if p == nil || p.Summary.Within == nil {
			return -1
		}
		return p.Summary.Within.Successes
	}
	for _, s := range sides(x) {
		if policy(s.r, "fifo") == nil {
			continue
		}
		f, l, c := within(policy(s.r, "fifo")), within(policy(s.r, "lifo")), within(policy(s.r, "codel-1s"))
		out = append(out, Check{
			Name: fmt.Sprintf("served within 1 s, LIFO vs FIFO (%s)", s.name),
			Want: "LIFO > FIFO (the seed: 450 > 339)",
			Got:  fmt.Sprintf("LIFO %d, FIFO %d", l, f),
			Held: f >= 0 && l > f,
		}, Check{
			Name: fmt.Sprintf("served within 1 s, CoDel vs FIFO (%s)", s.name),
			Want: "CoDel > FIFO",
			Got:  fmt.Sprintf("CoDel %d, FIFO %d", c, f),
			Held: f >= 0 && c > f,
		})
	}
	return out
}

// finish counts a policy's successes and says when its last answer came:
// the end of the first point by which the answers counted so far reach
// their total. Answers are counted by completion time (throughput), since
// the load generator files goodput under each request's send time.
func finish(p *report.Policy, interval float64) (done float64, at float64) {
	var total float64
	for _, pt := range p.Series {
		done += pt.GoodputRPS * interval
		total += pt.ThroughputRPS * interval
	}
	var cum float64
	for _, pt := range p.Series {
		cum += pt.ThroughputRPS * interval
		if cum >= total-0.5 {
			return done, pt.TS
		}
	}
	return done, 0
}

// checks002: seed 002's herd. The bounded executor finishes every task
// within 10% of the Little's-law bound; firing everything at once is slower
// or loses tasks.
func checks002(x *ExperimentResult) []Check {
	const tasks, workers, work = 1000, 10, 0.2
	bound := tasks * work / workers * x.TimeScale
	var out []Check
	for _, s := range sides(x) {
		b, f := policy(s.r, "bounded-executor"), policy(s.r, "fire-all")
		if b == nil {
			continue
		}
		bn, bt := finish(b, s.r.IntervalS)
		out = append(out, Check{
			Name: fmt.Sprintf("bounded executor: all tasks, total time (%s)", s.name),
			Want: fmt.Sprintf("%d tasks in <= 1.1 x the Little's-law bound %.2fs (tasks x work / workers)", tasks, bound),
			Got:  fmt.Sprintf("%.0f tasks by %.2fs", bn, bt),
			Held: bn >= tasks-0.5 && bt <= 1.1*bound+s.r.IntervalS,
		})
		if f == nil {
			continue // on sockets: its clients retry, and sluice load does not
		}
		fn, ft := finish(f, s.r.IntervalS)
		out = append(out, Check{
			Name: fmt.Sprintf("fire all at once: slower or loses tasks (%s)", s.name),
			Want: "more time than the bounded executor, or fewer tasks done",
			Got:  fmt.Sprintf("%.0f tasks by %.2fs", fn, ft),
			Held: ft > bt || fn < bn-0.5,
		})
	}
	return out
}

// checks004: seed 004's bucket: the served rate within 1% of the bucket's.
func checks004(x *ExperimentResult) []Check {
	var out []Check
	for _, s := range sides(x) {
		for _, b := range []struct {
			name string
			rate float64
		}{{"bucket-300", 300}, {"bucket-600", 600}} {
			p := policy(s.r, b.name)
			if p == nil {
				continue
			}
			want := b.rate / x.TimeScale
			g := p.Summary.GoodputRPS
			out = append(out, Check{
				Name: fmt.Sprintf("%s: served req/s (%s)", b.name, s.name),
				Want: fmt.Sprintf("%.0f ± 1%% (the seed: %s)", want, map[string]string{"bucket-300": "301", "bucket-600": "598"}[b.name]),
				Got:  fmt.Sprintf("%.1f", g),
				Held: math.Abs(g-want) <= 0.01*want,
			})
		}
	}
	return out
}
