package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rate"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs the demo for a second on loopback: the greedy client must
// be rate limited, the polite crowd never, and every request accounted for.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-demo", "-duration", "1s", "-crowd", "10"}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	counts, requests := summary(out.String())
	greedy, crowd := counts["greedy"], counts["crowd"]
	if greedy[0] == 0 || crowd[0] == 0 {
		t.Fatalf("no summary lines for both groups in:\n%s", out.String())
	}
	if greedy[2] == 0 {
		t.Errorf("greedy client got no 429: %v", greedy)
	}
	if crowd[2] != 0 {
		t.Errorf("polite clients got %d 429s", crowd[2])
	}
	for name, c := range counts {
		if c[4] != 0 || c[5] != 0 {
			t.Errorf("%s: %d unexpected statuses, %d errors", name, c[4], c[5])
		}
	}
	// Every request a client sent was answered (no errors above) and
	// went through the middleware's admission exactly once.
	if sent := greedy[0] + crowd[0]; requests != sent {
		t.Errorf("the middleware counted %d requests, the clients sent %d", requests, sent)
	}
	if !strings.Contains(out.String(), "adaptive concurrency limit now") {
		t.Error("no middleware summary")
	}
	if !strings.Contains(out.String(), "second half p50=") {
		t.Error("no backend summary")
	}
}

// summary reads the demo's summary: each group's sent, ok, 429, 503, other
// and errors, and the requests the middleware counted (-1 if none).
func summary(out string) (counts map[string][6]int, requests int) {
	counts, requests = map[string][6]int{}, -1
	for _, line := range strings.Split(out, "\n") {
		var name string
		var c [6]int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%s sent=%d ok=%d 429=%d 503=%d other=%d errors=%d",
			&name, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err == nil {
			counts[name] = c
		}
		fmt.Sscanf(line, "middleware: requests=%d", &requests)
	}
	return counts, requests
}

// TestCrowdBounds: -crowd is bounded, with an error that names the flag and
// the range. Each crowd client starts a goroutine, so -crowd 100000000 ran a
// short demo far past its -duration, growing toward the memory limit; and
// each is named by its own address in 198.51.101.0/24, so past 255 the
// names are not addresses and the server keys those clients by the load
// generator's own address: before the bound, a crowd of 300 got 429s. At
// the bound, every crowd client is its own: none gets a 429.
func TestCrowdBounds(t *testing.T) {
	for _, n := range []string{"-1", "256", "100000000"} {
		want := "-crowd must be in [0, 255], got " + n
		if _, err := parse([]string{"-crowd", n}, io.Discard); err == nil || err.Error() != want {
			t.Errorf("parse(-crowd %s) = %v, want %q", n, err, want)
		}
	}
	if _, err := parse([]string{"-crowd", "0"}, io.Discard); err != nil {
		t.Errorf("parse(-crowd 0): %v", err)
	}
	// Each of the 255 is a client of its own to the server: a full burst
	// from every one is served. Past 255 the names were not addresses,
	// and the server keyed those clients as one.
	o, err := parse([]string{"-crowd", "255", "-work", "1ms", "-burst", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(o, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for c := range maxCrowd {
		for range o.burst {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = "127.0.0.1:5000"
			req.Header.Set("X-Forwarded-For", demoIP(1, c))
			w := httptest.NewRecorder()
			s.handler.ServeHTTP(w, req)
			if w.Code == http.StatusTooManyRequests {
				t.Fatalf("crowd client %d (%s) answered 429 within its burst of %d", c, demoIP(1, c), o.burst)
			}
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-rate", "0"}, {"-rate", "-1"}, {"-burst", "0"}, {"-workers", "0"},
		{"-work", "0s"}, {"-duration", "-1s"}, {"-crowd", "-1"}, {"extra"},
		{"-trusted-proxies", "10.0.0.0/99", "-demo"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

// TestRateBounds: a -rate (or a -burst for it) that the server or the demo
// cannot run is refused, naming the flag. -rate 1e9 made the demo's greedy
// interval 0 and panicked; -rate 1e-12 overflowed the advertised window
// into a confusing error from httplimit. At the bounds, a request is served
// and the demo's intervals are positive.
func TestRateBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "1e9"}, "-rate must be in (0, 1e+06]"},
		{[]string{"-rate", "NaN"}, "-rate must be in"},
		{[]string{"-rate", "+Inf"}, "-rate must be in"},
		{[]string{"-rate", "1e-12"}, "-burst 20 at -rate 1e-12 takes"},
		{[]string{"-burst", "1000000000000000"}, "-burst 1000000000000000 at -rate 20 takes"},
		// A demo the machine cannot send: the server alone takes it.
		{[]string{"-demo", "-rate", "1e6"}, "-demo would send 2.5e+07 requests a second (10 × -rate 1e+06, and -crowd 30 at -rate/2 each), more than 20000"},
		{[]string{"-demo", "-rate", "1000", "-crowd", "21"}, "-demo would send 20500 requests a second"},
	} {
		if _, err := parse(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := parse([]string{"-demo", "-rate", "1000", "-crowd", "20"}, io.Discard); err != nil {
		t.Errorf("a demo of 20000 requests a second: %v", err)
	}
	slowest := strconv.FormatFloat(1/rate.MaxFill.Seconds()*(1+1e-9), 'g', -1, 64) // burst 1 refills in MaxFill
	for _, args := range [][]string{{"-rate", "1e6"}, {"-rate", slowest, "-burst", "1"}} {
		o, err := parse(append(args, "-work", "1ms"), io.Discard)
		if err != nil {
			t.Errorf("parse(%q): %v", args, err)
			continue
		}
		s, err := newServer(o, nil)
		if err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		w := httptest.NewRecorder()
		s.handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != http.StatusOK {
			t.Errorf("%q: first request answered %d, want 200", args, w.Code)
		}
		// The demo's greedy client and its crowd.
		for _, rps := range []float64{10 * o.rate, o.rate / 2} {
			if p := period(rps); p <= 0 {
				t.Errorf("%q: a client at %v/s sends every %v", args, rps, p)
			}
		}
	}
}
