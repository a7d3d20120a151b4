package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/sim"
)

// StepMeasure measures steps against url with the load generator: constant
// open-loop arrivals at the step's rate for step, the first fifth left out
// as warm-up, the client giving up after timeout (0: twice the SLO's
// latency). Before each step it waits for the service to drain the last
// one, and the search gives up on a service that has not answered for
// giveUp (0: a minute) after a step. Each step's line goes to progress.
func StepMeasure(url string, slo SLO, step, timeout, giveUp time.Duration, progress io.Writer) Measure {
	timeout = stepTimeout(slo, timeout)
	if giveUp == 0 {
		// Long enough for workers to restart or a circuit breaker to
		// close, short enough that a service that went down ends the
		// search rather than hangs it.
		giveUp = time.Minute
	}
	var quiet time.Duration // the fastest probe seen: the service idle
	return func(ctx context.Context, rate float64) (Step, error) {
		if err := drain(ctx, url, &quiet, timeout, giveUp); err != nil {
			return Step{}, err
		}
		res, err := load.Run(ctx, StepLoad(url, slo, rate, step, timeout))
		if err != nil {
			return Step{}, err
		}
		st := Step{
			RateRPS:    rate,
			Sent:       res.Planned,
			Successes:  res.Good,
			QuantileMs: quantileMs(res.Latency, slo.Quantile),
			P50Ms:      ms(res.Success.P50),
			MeanMs:     ms(res.Success.Mean),
			// A generator whose sends lagged by a good part of the SLO's
			// latency measured itself (or its machine), not the service.
			Behind:   ms(res.SendLag.P99) > ms(slo.Latency)/2,
			Failures: map[string]int64{},
		}
		for code, n := range res.Status {
			if code/100 != 2 {
				st.Failures[fmt.Sprintf("HTTP %d", code)] += n
			}
		}
		for kind, n := range res.Errors {
			st.Failures[kind] += n
		}
		if late := res.OK - res.Good; late > 0 {
			st.Failures["2xx after the timeout"] += late
		}
		if res.Skipped > 0 {
			st.Failures["not sent"] += res.Skipped
		}
		verdict := "meets"
		if !st.Meets(slo) {
			verdict = "misses"
		}
		if progress != nil {
			failed := ""
			if f := st.failures(); f != "" {
				failed = " (" + f + ")"
			}
			fmt.Fprintf(progress, "step %8.1f rps: success %.3f%%%s, p%g %.1f ms, successes' p50 %.1f ms: %s the SLO%s\n",
				rate, 100*st.success(), failed, slo.Quantile*100, st.QuantileMs, st.P50Ms, verdict, map[bool]string{true: " (the generator fell behind: send lag p99 " + fmt.Sprintf("%.1f ms)", ms(res.SendLag.P99))}[st.Behind])
		}
		return st, nil
	}
}

// StepLoad is the load generator's run of one step at rate against url,
// as StepMeasure sends it: constant open-loop arrivals for step, the
// first fifth left out as warm-up, the client giving up after timeout
// (0: twice the SLO's latency). The command checks the first step's
// before it probes the service.
func StepLoad(url string, slo SLO, rate float64, step, timeout time.Duration) load.Config {
	return load.Config{
		URL:      url,
		Load:     sim.Load{Arrivals: sim.ConstantArrivals, Rate: rate, Timeout: stepTimeout(slo, timeout)},
		Duration: step,
		Warmup:   step / 5,
	}
}

// stepTimeout is a step's client timeout: timeout, or twice the SLO's
// latency if it is 0.
func stepTimeout(slo SLO, timeout time.Duration) time.Duration {
	if timeout == 0 {
		return 2 * slo.Latency
	}
	return timeout
}

// quantileMs is the smallest of the load generator's percentiles at or
// above q: the SLO is checked against a figure no better than the one it
// names.
func quantileMs(p load.Percentiles, q float64) float64 {
	switch {
	case q <= 0.50:
		return ms(p.P50)
	case q <= 0.90:
		return ms(p.P90)
	case q <= 0.95:
		return ms(p.P95)
	case q <= 0.99:
		return ms(p.P99)
	case q <= 0.999:
		return ms(p.P999)
	}
	return ms(p.Max)
}

// WriteRecommendation prints the advice and its configuration snippet.
func WriteRecommendation(w io.Writer, r Recommendation) error {
	knee := "latency did not turn up within the rates tried"
	if r.KneeRPS > 0 {
		knee = fmt.Sprintf("latency turns up at %.1f rps (successes' p50 past twice the lowest rate's)", r.KneeRPS)
	}
	// Without these the highest rate tried, the rate reached when the
	// search stopped, or the generator's own limit, read as the service's
	// capacity.
	if r.Unfinished != "" {
		knee += fmt.Sprintf("\nthe search did not finish (%s): %.1f rps is the best rate found before it stopped, and the capacity may be higher", r.Unfinished, r.RateRPS)
	}
	if r.Unbounded {
		knee += fmt.Sprintf("\nno rate tried missed the SLO: the capacity is above %.1f rps (raise -max to find it)", r.RateRPS)
	}
	if r.BehindRPS > 0 {
		knee += fmt.Sprintf("\nthe load generator fell behind its schedule from %.1f rps: those steps measured this machine, not the service, whose capacity may be higher", r.BehindRPS)
	}
	_, err := fmt.Fprintf(w, `SLO %s holds up to %.1f rps (measured p-latency there: %.1f ms)
%s

recommended:
  rate limit         %.0f rps
  concurrency limit  %d in flight (Little's law: N = X × R, R the no-load latency)
  max wait           %v (the latency budget left above the measured percentile)

%s`, r.SLO, r.RateRPS, r.QuantileMs, knee, math.Floor(r.RateRPS), r.Concurrency,
		time.Duration(r.MaxWaitMs*float64(time.Millisecond)).Round(time.Millisecond), r.Snippet())
	return err
}

// WriteRecommendationJSON writes r as indented JSON.
func WriteRecommendationJSON(w io.Writer, r Recommendation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ErrNoAnswer is matched by the error of a step whose service took the
// drain probe's connection but did not answer it, in time or at all (it
// closed the connection): it listens, so it is not unreachable
// (load.ErrUnreachable).
var ErrNoAnswer = errors.New("target accepts connections but does not answer")

// ErrRedirect is matched by the error of a step whose URL answered the
// first drain probe with a redirect: the load generator counts a redirect
// as a failure and does not follow it, so every step would fail.
var ErrRedirect = errors.New("the URL redirects")

// drain waits until the service answers one request about as fast as it
// did idle: a step past capacity leaves a queue behind (the service works
// on requests whose clients gave up), and the next step must not measure
// it. It probes one request at a time, for at most giveUp. Until the
// service has answered once (*quiet is 0), a probe waits at most first,
// the step's client timeout, and a probe that fails ends the search: a
// service that does not answer one request within it, idle, fails every
// request of a step. Once it has answered, a failed probe (a reset, a
// refused connection, no answer in 30 s) is the service still busy with
// the last step, or recovering from it: drain backs off (20 ms, doubling
// to 1 s) and probes again, and fails only if nothing answered within
// giveUp. A slow answer at giveUp's end is measured anyway.
func drain(parent context.Context, url string, quiet *time.Duration, first, giveUp time.Duration) error {
	// A redirect is an answer, as to the load generator.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(parent, giveUp)
	defer cancel()
	answers := 0 // the probes of this drain answered
	backoff := 20 * time.Millisecond
	for {
		wait, what := 30*time.Second, ""
		if *quiet == 0 {
			wait, what = min(first, giveUp), ", the client's timeout (-timeout)"
		}
		probeCtx, probeCancel := context.WithTimeout(ctx, wait)
		var connected atomic.Bool
		probeCtx = httptrace.WithClientTrace(probeCtx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
		})
		req, err := http.NewRequestWithContext(probeCtx, http.MethodGet, url, nil)
		if err != nil {
			probeCancel()
			return err
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			timedOut := probeCtx.Err() == context.DeadlineExceeded
			probeCancel()
			if err := parent.Err(); err != nil {
				return err // stopped (Ctrl-C), not unreachable
			}
			if *quiet != 0 && ctx.Err() == nil {
				// Answered before: still busy or recovering. Probe again,
				// unless giveUp ends during the wait: then this probe's
				// failure is what to report (a probe on the ended context
				// would fail before connecting, and read "unreachable").
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
					backoff = min(2*backoff, time.Second)
					continue
				}
			}
			if answers > 0 {
				return nil // still busy after giveUp: measure anyway
			}
			if connected.Load() && !timedOut {
				if e := errors.Unwrap(err); e != nil {
					err = e // *url.Error's "Get URL:" repeats the URL
				}
			}
			if *quiet != 0 {
				// Not one answer in giveUp, from a service that answered
				// before: it stopped answering after the last step.
				switch {
				case connected.Load() && timedOut:
					return fmt.Errorf("%w: %s: no answer for %v after the last step", ErrNoAnswer, url, giveUp)
				case connected.Load():
					return fmt.Errorf("%w: %s: no answer for %v after the last step (the last connection ended with %v)", ErrNoAnswer, url, giveUp, err)
				}
				return fmt.Errorf("%w: %s: no connection for %v after the last step (%v)", load.ErrUnreachable, url, giveUp, err)
			}
			if connected.Load() && timedOut {
				return fmt.Errorf("%w: %s: no answer within %v%s", ErrNoAnswer, url, wait, what)
			}
			if connected.Load() {
				return fmt.Errorf("%w: %s: the connection ended without an answer (%v)", ErrNoAnswer, url, err)
			}
			return fmt.Errorf("%w: %s: %v", load.ErrUnreachable, url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		probeCancel()
		if to, err := resp.Location(); err == nil && *quiet == 0 && resp.StatusCode/100 == 3 {
			return fmt.Errorf("%w: %s answers %s, a redirect to %s: the load generator counts a redirect as a failure and does not follow it; give the URL it leads to",
				ErrRedirect, url, resp.Status, to)
		}
		d := time.Since(start)
		if *quiet == 0 || d < *quiet {
			*quiet = d
		}
		if answers >= 2 && d <= 2**quiet+2*time.Millisecond {
			return nil
		}
		answers, backoff = answers+1, 20*time.Millisecond
		select {
		case <-ctx.Done():
			return parent.Err() // nil after giveUp: measure anyway
		case <-time.After(20 * time.Millisecond):
		}
	}
}
