package lab

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/sluicehq/sluice/cmd/sluice/internal/report"
)

// Version is the JSON schema version of Result, bumped only if a field
// changes meaning.
const Version = 1

// AgreementPP is how far, in percentage points, the real run's success share
// may be from the simulator's for the lab to call the model right.
const AgreementPP = 5.0

// Result is one run of the lab: every experiment, real and simulated.
type Result struct {
	Version int `json:"version"`
	// Started is the UTC start time (RFC 3339); ElapsedS the wall time.
	Started  string  `json:"started"`
	ElapsedS float64 `json:"elapsed_s"`
	// CPU is the machine's CPU model and count, for reading the figures.
	CPU         string             `json:"cpu"`
	Experiments []ExperimentResult `json:"experiments"`
}

// ExperimentResult is one experiment: its simulated and real reports (the
// same model as `sluice sim --json`), their agreement, and the seed's claims
// checked against them.
type ExperimentResult struct {
	Name      string  `json:"name"`
	Title     string  `json:"title"`
	File      string  `json:"file"`
	Claim     string  `json:"seed_claim"`
	TimeScale float64 `json:"time_scale"`
	Curves    bool    `json:"curves,omitempty"`
	// Sim is the simulator's run of the scaled scenario; Real the same
	// scenario on loopback sockets, nil when only the simulator ran.
	Sim  *report.Report `json:"sim"`
	Real *report.Report `json:"real,omitempty"`
	// Agreement compares real and simulated success shares per policy.
	Agreement []Agreement `json:"agreement,omitempty"`
	// Checks are the seed's claims and sluice's bars, held or not.
	Checks []Check `json:"checks"`
	// Error is set when the experiment could not run.
	Error string `json:"error,omitempty"`
}

// Agreement is one policy's success share — successes within the client's
// timeout as a percentage of the requests due — real and simulated.
type Agreement struct {
	Policy  string  `json:"policy"`
	SimPct  float64 `json:"sim_pct"`
	RealPct float64 `json:"real_pct"`
	// DiffPP is RealPct - SimPct in percentage points; Held says whether
	// its size is within AgreementPP.
	DiffPP float64 `json:"diff_pp"`
	Held   bool    `json:"held"`
}

// Check is one claim tested against the results.
type Check struct {
	// Name says what is checked; Want the bar; Got what was measured.
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Held bool   `json:"held"`
}

// Held reports whether every check and every agreement of x held.
func (x *ExperimentResult) Held() bool {
	if x.Error != "" {
		return false
	}
	for _, c := range x.Checks {
		if !c.Held {
			return false
		}
	}
	for _, a := range x.Agreement {
		if !a.Held {
			return false
		}
	}
	return true
}

// Err returns an error naming each experiment that could not run (its
// Error), or nil: a lab with one is a failed run, not a finding. A check
// that did not hold is a finding.
func (r *Result) Err() error {
	var errs []error
	for _, x := range r.Experiments {
		if x.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", x.Name, x.Error))
		}
	}
	return errors.Join(errs...)
}

// WriteJSON writes r as indented JSON, with what is not printable in the
// names escaped as report.JSON does: -json prints it on the terminal.
func WriteJSON(w io.Writer, r *Result) error {
	return report.JSON(w, r)
}

// successPct is the share of the requests due in the window (sent, or not
// sent for want of a client worker) that succeeded, however late after the
// end their answer came: the figure real and simulated runs are compared
// on. Both sides count it by send time (the simulator follows the requests
// still out at the end to their answers, as the load generator waits for
// them), so a queue that drains after a ramp counts on both. It does not
// depend on the origin's capacity, which a seed 004 bucket leaves far away.
func successPct(s report.Summary) float64 {
	due := s.Sent + s.Unsent - s.Retries
	if due <= 0 {
		return 0
	}
	return 100 * float64(s.SucceededBySend) / float64(due)
}

// agree pairs the policies of the simulated and real reports by name.
func agree(simR, realR *report.Report) []Agreement {
	if simR == nil || realR == nil {
		return nil
	}
	var out []Agreement
	for _, sp := range simR.Policies {
		rp := policy(realR, sp.Name)
		if rp == nil {
			continue
		}
		a := Agreement{Policy: sp.Name, SimPct: successPct(sp.Summary), RealPct: successPct(rp.Summary)}
		a.DiffPP = a.RealPct - a.SimPct
		a.Held = math.Abs(a.DiffPP) <= AgreementPP
		out = append(out, a)
	}
	return out
}

// policy returns the named policy of r, or nil.
func policy(r *report.Report, name string) *report.Policy {
	if r == nil {
		return nil
	}
	for i := range r.Policies {
		if r.Policies[i].Name == name {
			return &r.Policies[i]
		}
	}
	return nil
}
