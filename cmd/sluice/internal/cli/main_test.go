package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives its tests: the
// commands start servers, watchers and signal loops that must all end
// when Main returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
