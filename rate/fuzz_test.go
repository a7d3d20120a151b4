package rate

import (
	"math"
	"testing"
	"time"
)

// event is one change to the bucket seen by the fuzz model: tokens taken
// (n > 0) by an admission acting at act, or given back (n < 0).
type event struct {
	n        int
	req, act int64 // ns from t0; req == act for refunds
	hw       int64 // the latest time any op had used by then
	admit    bool
}

// FuzzBucket drives a bucket with a random sequence of AllowAt, ReserveAt,
// Cancel, SetRateAt, SetBurstAt, with time steps that may go backwards,
// and checks after every step that
//   - the bucket never holds more than its burst, and its numbers stay finite;
//   - over any window, from the request of admission i to the moment
//     admission j may act, the tokens taken minus those given back are at
//     most maxRate·window + maxBurst (the token-bucket bound). With a fixed
//     config this holds even when time goes backwards. A setter fixes the
//     tokens as of its time, and with rate 0 tokens carry no time, so once
//     a setter has run, a window ends at the latest time used so far.
//
// Each op is 4 bytes: kind, time step (int8, in quarter intervals), n, wait.
func FuzzBucket(f *testing.F) {
	f.Add(10.0, uint16(3), []byte{0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 4, 1, 0})
	f.Add(1e10, uint16(100), []byte{1, 1, 50, 200, 0, 0, 60, 0, 2, 0, 0, 0, 1, 0, 100, 255})
	f.Add(1e-3, uint16(1), []byte{0, 0, 1, 0, 0, 255, 1, 0, 0, 100, 1, 0, 0, 127, 1, 0})
	f.Add(0.0, uint16(5), []byte{0, 0, 5, 0, 3, 0, 1, 0, 0, 10, 5, 0, 4, 0, 9, 0, 1, 0, 2, 5})
	f.Add(3e8, uint16(7), []byte{1, 0, 7, 9, 3, 2, 2, 0, 1, 5, 7, 90, 2, 0, 0, 0, 4, 0, 2, 0, 0, 128, 2, 0})
	f.Add(1e6, uint16(1000), []byte{3, 0, 5, 0, 1, 0, 200, 40, 3, 3, 1, 0, 1, 40, 250, 255, 2, 0, 0, 0, 0, 127, 255, 0})
	f.Fuzz(func(t *testing.T, r float64, burst uint16, ops []byte) {
		if !(r >= 0 && r < 1e15) {
			r = 1e3
		}
		cfg := Config{Rate: r, Burst: int(burst)}
		b := mustBucket(t, cfg)
		unit := int64(1)
		if r > 0 {
			unit = max(1, int64(math.Min(1e9/r/4, 1e15)))
		}
		maxRate, maxBurst := r, int(burst)
		var (
			now, hw int64 // ns from t0; hw: the latest now so far
			events  []event
			pending []Reservation
			changes int
		)
		at := func() time.Time { return t0.Add(time.Duration(now)) }
		const limit = 100 * 365 * 24 * int64(time.Hour)
		for len(ops) >= 4 {
			kind, step, nb, wb := ops[0]%6, int8(ops[1]), ops[2], ops[3]
			ops = ops[4:]
			now = max(-limit, min(limit, now+int64(step)*unit))
			hw = max(hw, now)
			n := int(nb) % (cfg.Burst + 2)
			switch kind {
			case 0:
				if b.AllowAt(at(), n) && n > 0 { // n <= 0 takes nothing, bounds nothing
					events = append(events, event{n: n, req: now, act: now, hw: hw, admit: true})
				}
			case 1:
				wait := time.Duration(int64(wb) * unit)
				res, ok := b.ReserveAt(at(), n, wait)
				if ok && res.Tokens() > 0 {
					if res.Delay() < 0 || res.Delay() > wait+1 {
						t.Fatalf("delay %v outside [0, %v]", res.Delay(), wait)
					}
					events = append(events, event{n: res.Tokens(), req: now, act: now + int64(res.Delay()), hw: hw, admit: true})
					pending = append(pending, res)
				}
			case 2:
				if len(pending) > 0 {
					i := int(nb) % len(pending)
					events = append(events, event{n: -pending[i].Tokens(), req: now, act: now})
					pending[i].Cancel()
					pending = append(pending[:i], pending[i+1:]...)
				}
			case 3:
				factors := [...]float64{0, 0.5, 2, 10, 1e-3, 1}
				nr := math.Min(r*factors[int(nb)%len(factors)], 1e15)
				if err := b.SetRateAt(t0.Add(time.Duration(hw)), nr); err != nil { // setters take the latest time
					t.Fatal(err)
				}
				cfg.Rate, maxRate = nr, math.Max(maxRate, nr)
				changes++
			case 4:
				nbst := int(nb) % (int(burst) + 2)
				if err := b.SetBurstAt(t0.Add(time.Duration(hw)), nbst); err != nil {
					t.Fatal(err)
				}
				cfg.Burst, maxBurst = nbst, max(maxBurst, nbst)
				changes++
			}
			tk := b.TokensAt(at())
			if math.IsNaN(tk) || math.IsInf(tk, 0) || tk > float64(cfg.Burst)+1e-9 {
				t.Fatalf("tokens %v with burst %d", tk, cfg.Burst)
			}
		}
		checkWindows(t, events, maxRate, maxBurst, changes)
	})
}

// checkWindows asserts the token-bucket bound over every window that starts
// at an admission's request and ends at a later admission's act time.
func checkWindows(t *testing.T, events []event, maxRate float64, maxBurst, changes int) {
	t.Helper()
	for i, ei := range events {
		if !ei.admit {
			continue
		}
		sum := 0
		for _, ej := range events[i:] {
			sum += ej.n
			if !ej.admit {
				continue
			}
			end := ej.act
			if changes > 0 {
				end = max(end, ej.hw)
			}
			window := float64(end-ei.req) / 1e9
			// Slack for the fixed point (2^-17 of the rate) and for
			// float rounding when a setter carries tokens over.
			refill := maxRate * window
			bound := refill + math.Abs(refill)/(1<<15) + float64(maxBurst) + 1e-6*float64(changes+1)
			if float64(sum) > bound {
				t.Fatalf("%d tokens taken in a window of %.9gs: bound %.9g (rate %g, burst %d)",
					sum, window, bound, maxRate, maxBurst)
			}
		}
	}
}
