package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Table writes r as a summary table, one row per policy:
//
//	POLICY  OFFERED/s  GOODPUT/s  %ACHIEVABLE  THROUGHPUT/s  OK p50  OK p99  OK p99.9  TIMEOUTS  ORIGIN ERR  REJECTED  REJ p99
//
// The title gives the origin's capacity, the clients' demand and what was
// achievable, the smaller of the two; %ACHIEVABLE is goodput as a share of
// it, so a policy that served all it could reads 100% whether the origin or
// the demand was the bound. Rates are per second; OFFERED counts attempts
// sent, which differs between policies when clients have few workers or
// retry; OK latencies are of successes, from the intended
// send time; TIMEOUTS are requests the client gave up on; ORIGIN ERR those
// the origin refused or timed out; REJECTED lists the policy's rejections by
// reason; REJ p99 is how fast the slowest rejections came back. With a
// Within bound, two more columns count successes within it and requests
// admitted within it.
func Table(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: %s simulated, seed %d", Printable(r.Scenario), fmtSeconds(r.DurationS), r.Seed)
	if len(r.Policies) > 0 {
		s := r.Policies[0].Summary
		fmt.Fprintf(&b, ", capacity %s rps, demand %s rps: achievable %s rps",
			fmtRate(s.CapacityRPS), fmtRate(s.DemandRPS), fmtRate(s.AchievableRPS))
	}
	b.WriteString("\n\n")
	var within *Within
	if len(r.Policies) > 0 {
		within = r.Policies[0].Summary.Within
	}
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprint(tw, "POLICY\tOFFERED/s\tGOODPUT/s\t%ACHIEVABLE\tTHROUGHPUT/s\tOK p50\tOK p99\tOK p99.9\tTIMEOUTS\tORIGIN ERR\tREJECTED\tREJ p99")
	if within != nil {
		bound := time.Duration(within.BoundMs * float64(time.Millisecond)).String()
		fmt.Fprintf(tw, "\tOK<=%s\tADMIT<=%s", bound, bound)
	}
	fmt.Fprintln(tw)
	for _, p := range r.Policies {
		s := p.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s",
			Printable(p.Name), fmtRate(s.OfferedRPS), fmtRate(s.GoodputRPS), fmtPct(s.GoodputPctOfAchievable, s.AchievableRPS), fmtRate(s.ThroughputRPS),
			fmtLatency(s.Success.P50, s.Success.Count), fmtLatency(s.Success.P99, s.Success.Count),
			fmtLatency(s.Success.P999, s.Success.Count), s.Timeouts, s.Refused+s.OriginTimeouts,
			fmtRejected(s), fmtLatency(s.Rejection.P99, s.Rejection.Count))
		if within != nil {
			var succ, adm int64
			if s.Within != nil {
				succ, adm = s.Within.Successes, s.Within.Admitted
			}
			fmt.Fprintf(tw, "\t%d\t%d", succ, adm)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := phaseTable(&b, r); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// phaseTable writes goodput per phase of the origin, when it changes:
//
//	GOODPUT BY PHASE  0s-1m0s (cap 7.00, achievable 5.00)  1m0s-3m0s (cap 3.50, achievable 3.50)  ...
//	adaptive          4.98 (100%)                          3.40 (97%)                             ...
//
// The percentages are of what was achievable in the phase.
func phaseTable(b *strings.Builder, r *Report) error {
	if len(r.Policies) == 0 || len(r.Policies[0].Phases) < 2 {
		return nil
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprint(tw, "GOODPUT BY PHASE")
	for _, ph := range r.Policies[0].Phases {
		fmt.Fprintf(tw, "\t%s-%s (cap %s, achievable %s)", fmtSeconds(ph.FromS), fmtSeconds(ph.ToS), fmtRate(ph.CapacityRPS), fmtRate(ph.AchievableRPS))
	}
	fmt.Fprintln(tw)
	for _, p := range r.Policies {
		fmt.Fprint(tw, Printable(p.Name))
		for _, ph := range p.Phases {
			fmt.Fprintf(tw, "\t%s (%s)", fmtRate(ph.GoodputRPS), fmtPct(ph.GoodputPctOfAchievable, ph.AchievableRPS))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func fmtPct(pct, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return strconv.FormatFloat(pct, 'f', 0, 64) + "%"
}

// fmtRejected lists rejections by reason, most frequent first: "1203
// (queue_full 1200, limit 3)".
func fmtRejected(s Summary) string {
	if s.RejectedTotal == 0 {
		return "0"
	}
	reasons := make([]string, 0, len(s.Rejected))
	for k := range s.Rejected {
		reasons = append(reasons, k)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if c := cmp.Compare(s.Rejected[b], s.Rejected[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(reasons))
	for i, k := range reasons {
		parts[i] = k + " " + strconv.FormatInt(s.Rejected[k], 10)
	}
	return strconv.FormatInt(s.RejectedTotal, 10) + " (" + strings.Join(parts, ", ") + ")"
}

// fmtLatency prints milliseconds with three significant digits in a unit
// that suits them: "2.01s", "275ms", "0.41ms", "12µs"; "-" with no samples.
func fmtLatency(ms float64, count int64) string {
	if count == 0 {
		return "-"
	}
	switch {
	case ms >= 1000:
		return sig3(ms/1000) + "s"
	case ms >= 0.1:
		return sig3(ms) + "ms"
	default:
		return sig3(ms*1000) + "µs"
	}
}

// sig3 formats v with three significant digits, without an exponent.
func sig3(v float64) string {
	if v == 0 {
		return "0"
	}
	digits := 3 - int(math.Floor(math.Log10(math.Abs(v)))) - 1
	if digits < 0 {
		digits = 0
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}

func fmtSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64) + "s"
}

// Printable returns s as it is when every character is printable, else
// quoted with escapes (strconv.Quote): a name comes from a file, and must
// not send terminal escapes or bidirectional-text controls (which reorder
// what the reader sees) to the terminal, nor a tab into the table.
func Printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}
