package lab

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestReportInBrowser opens the report of a simulated tour in headless
// Chromium, as a reader would: the page must run its self-check without a
// script error, every chart must have data, and a screenshot must come out.
// make test installs chromium when it is missing (apt-get install chromium).
func TestReportInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: make test installs it (apt-get install -y chromium)")
	}
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(InRoot(Tour(), root), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), plan, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page, err := WriteFiles(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + page
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0"}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	dump := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...)
	dump.Stderr = &stderr
	dom, err := dump.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	body := regexp.MustCompile(`<body data-charts="(\d+)" data-empty="(\d+)" data-errors="(\d+)"`).FindSubmatch(dom)
	if body == nil {
		t.Fatalf("the page's self-check did not run (a script error?); console:\n%s", stderr.String())
	}
	charts, _ := strconv.Atoi(string(body[1]))
	if charts < 5*3 || string(body[2]) != "0" || string(body[3]) != "0" {
		t.Errorf("charts %s, without data %s, script errors %s", body[1], body[2], body[3])
	}
	if m := regexp.MustCompile(`(?i)uncaught|console\(.*error`).Find(stderr.Bytes()); m != nil {
		t.Errorf("script error in the console: %s", m)
	}

	shot := filepath.Join(dir, "report.png")
	cmd := exec.CommandContext(ctx, bin, append(args, "--window-size=1100,2400", "--screenshot="+shot, url)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	fi, err := os.Stat(shot)
	if err != nil || fi.Size() < 20_000 {
		t.Fatalf("screenshot %s: %v (a blank page is a few kB)", shot, err)
	}
	if keep := os.Getenv("LAB_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(keep, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
