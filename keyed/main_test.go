package keyed_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine of its own (eviction is lazy, on insert);
// this keeps it that way, and checks that Acquire leaves no waiter behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
