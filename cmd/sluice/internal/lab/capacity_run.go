package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/sim"
)

// StepMeasure measures steps against url with the load generator: constant
// open-loop arrivals at the step's rate for step, the first fifth left out
// as warm-up, the client giving up after timeout (0: twice the SLO's
// latency). Each step's line goes to progress.
func StepMeasure(url string, slo SLO, step, timeout time.Duration, progress io.Writer) Measure {
	if timeout == 0 {
		timeout = 2 * slo.Latency
	}
	return func(ctx context.Context, rate float64) (Step, error) {
		res, err := load.Run(ctx, load.Config{
			URL:      url,
			Load:     sim.Load{Arrivals: sim.ConstantArrivals, Rate: rate, Timeout: timeout},
			Duration: step,
			Warmup:   step / 5,
		})
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
			// A generator that sent late measured itself, not the service.
			Behind: res.Sent > 0 && float64(res.Late) > 0.01*float64(res.Sent),
		}
		verdict := "meets"
		if !st.Meets(slo) {
			verdict = "misses"
		}
		if progress != nil {
			fmt.Fprintf(progress, "step %8.1f rps: success %.3f%%, p%g %.1f ms, successes' p50 %.1f ms: %s the SLO%s\n",
				rate, 100*st.success(), slo.Quantile*100, st.QuantileMs, st.P50Ms, verdict, map[bool]string{true: " (the generator fell behind)"}[st.Behind])
		}
		return st, nil
	}
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
	_, err := fmt.Fprintf(w, `SLO %s holds up to %.1f rps (measured p-latency there: %.1f ms)
%s

recommended:
  rate limit         %.0f rps
  concurrency limit  %d in flight (Little's law: N = X × R at that rate)
  max wait           %v (the latency budget left above the measured percentile)

%s`, r.SLO, r.RateRPS, r.QuantileMs, knee, r.RateRPS, r.Concurrency,
		time.Duration(r.MaxWaitMs*float64(time.Millisecond)).Round(time.Millisecond), r.Snippet())
	return err
}

// WriteRecommendationJSON writes r as indented JSON.
func WriteRecommendationJSON(w io.Writer, r Recommendation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
