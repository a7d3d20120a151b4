package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
)

// The README's short example, as written there: a rate limit and a
// concurrency limit composed, and work admitted through both.
func Example() {
	bucket, err := rate.NewBucket(rate.Config{Rate: 100, Burst: 20})
	if err != nil {
		panic(err)
	}
	limit, err := concurrency.New(concurrency.Config{Limit: 16, MaxQueue: 32})
	if err != nil {
		panic(err)
	}
	policy := sluice.All(bucket, limit) // both admit, or neither keeps anything

	err = handle(context.Background(), policy)
	fmt.Println(err, policy.Stats().Admitted)
	// Output: <nil> 1
}

func handle(ctx context.Context, policy sluice.Limiter) error {
	permit, err := policy.Acquire(ctx)
	if err != nil {
		// errors.Is(err, sluice.ErrRejected); sluice.RetryAfter(err) gives a
		// hint; errors.Is(err, sluice.ErrQuota) means "over quota" (429)
		return err
	}
	start := time.Now()
	err = work(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		permit.Release(sluice.Dropped, time.Since(start)) // an overload signal
		return err
	}
	permit.Release(sluice.Success, time.Since(start))
	return err
}

func work(context.Context) error { return nil }

// The README shows Example as this file has it, so the README's example
// compiles and runs as written.
func TestReadmeExampleIsThisFile(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "## A short example\n")
	if ok {
		_, block, ok = strings.Cut(block, "```go\n")
	}
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	_, body, found := strings.Cut(string(src), "\nfunc Example() {")
	body, _, _ = strings.Cut("func Example() {"+body, "\n// The README shows Example")
	if !ok || !found || block != body {
		t.Errorf("README's short example is not example_readme_test.go's Example, handle and work:\n%s", block)
	}
}

// The README's recommended setup is httplimit's Example_recommended: each
// line of the README's block ("..." aside) is a line of that example, so
// the README cannot drift from code that compiles and runs.
func TestReadmeRecommendedIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("httplimit/example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "(httplimit's `Example_recommended` runs it):\n\n```go\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	_, example, found := strings.Cut(string(src), "\nfunc Example_recommended() {")
	if !ok || !found {
		t.Fatalf("README's recommended block (%v) or httplimit's Example_recommended (%v) not found", ok, found)
	}
	example, _, _ = strings.Cut(example, "\n}\n")
	lines := map[string]bool{}
	for _, l := range strings.Split(example, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if l = strings.TrimSpace(l); l != "..." && !lines[l] {
			t.Errorf("README's recommended line %q is not in httplimit's Example_recommended", l)
		}
	}
}
