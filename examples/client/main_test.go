package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo sends a short batch at four times the demo server's rate: every
// request must end as ok, refused or throttled, and the burst at least must
// get through.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	const n = 60
	if err := run(t.Context(), []string{"-demo", "-n", fmt.Sprint(n)}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	var ok, refused, throttled, failed int
	found := false
	for _, line := range strings.Split(out.String(), "\n") {
		if _, err := fmt.Sscanf(line, "ok=%d refused=%d throttled=%d failed=%d", &ok, &refused, &throttled, &failed); err == nil {
			found = true
		}
	}
	if !found {
		t.Fatalf("no tally line in:\n%s", out.String())
	}
	if ok+refused+throttled+failed != n || failed != 0 {
		t.Errorf("ok=%d refused=%d throttled=%d failed=%d; want %d in all, none failed", ok, refused, throttled, failed, n)
	}
	if ok < 10 {
		t.Errorf("ok=%d, want at least the server's burst of 10", ok)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-url", "ftp://x/"}, {"-url", "::"}, {"-demo", "-url", "http://x/"},
		{"-demo", "-n", "0"}, {"-demo", "-concurrency", "0"}, {"-demo", "-timeout", "0s"},
		{"-demo", "-rps", "-1"}, {"-demo", "-server-rate", "0"}, {"-demo", "extra"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
