package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
	counts := map[string][6]int{}
	requests := -1 // as the middleware counted them
	for _, line := range strings.Split(out.String(), "\n") {
		var name string
		var c [6]int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%s sent=%d ok=%d 429=%d 503=%d other=%d errors=%d",
			&name, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err == nil {
			counts[name] = c
		}
		fmt.Sscanf(line, "middleware: requests=%d", &requests)
	}
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
