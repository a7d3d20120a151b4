package lab

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// WriteText writes a terminal summary of r: per experiment, the checks and
// the real-against-simulated agreement, with what did not hold spelled out.
// What comes from a file (names, and errors that quote it) is written as
// report.Table writes it (report.Printable): quoted when it holds a
// terminal escape or a bidirectional-text control.
func WriteText(w io.Writer, r *Result) error {
	q := report.Printable
	var b strings.Builder
	held, total := 0, 0
	for i := range r.Experiments {
		x := &r.Experiments[i]
		fmt.Fprintf(&b, "\n%s: %s (time scale %g)\n", q(x.Name), q(x.Title), x.TimeScale)
		if x.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", q(x.Error))
		}
		if len(x.Agreement) > 0 || x.Sim != nil {
			tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  POLICY\tGOODPUT/s REAL\tSIM\tSUCCESS% REAL\tSIM\tDIFF")
			for _, sp := range x.Sim.Policies {
				rp := policy(x.Real, sp.Name)
				realG, realPct, diff := "-", "-", "-"
				if rp != nil {
					realG = fmt.Sprintf("%.2f", rp.Summary.GoodputRPS)
					realPct = fmt.Sprintf("%.1f", successPct(rp.Summary))
				}
				for _, a := range x.Agreement {
					if a.Policy == sp.Name {
						diff = fmt.Sprintf("%+.1f pp", a.DiffPP)
						if !a.Held {
							diff += " (over 5)"
						}
						total++
						if a.Held {
							held++
						}
					}
				}
				fmt.Fprintf(tw, "  %s\t%s\t%.2f\t%s\t%.1f\t%s\n", q(sp.Name), realG, sp.Summary.GoodputRPS, realPct, successPct(sp.Summary), diff)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		for _, p := range realPolicies(x) {
			if p.Summary.SendLag != nil && float64(p.Summary.Late) > 0.01*float64(p.Summary.Sent) {
				fmt.Fprintf(&b, "  note: %s: the load generator sent %d requests late (send lag p99 %.1f ms): the machine was busy, read its figures with that\n",
					q(p.Name), p.Summary.Late, p.Summary.SendLag.P99)
			}
		}
		for _, c := range x.Checks {
			total++
			mark := "ok  "
			if c.Held {
				held++
			} else {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "  %s %s: %s (want %s)\n", mark, q(c.Name), q(c.Got), q(c.Want))
		}
	}
	fmt.Fprintf(&b, "\n%d of %d checks held, in %.0f s on %s\n", held, total, r.ElapsedS, r.CPU)
	_, err := io.WriteString(w, b.String())
	return err
}

func realPolicies(x *ExperimentResult) []report.Policy {
	if x.Real == nil {
		return nil
	}
	return x.Real.Policies
}
