package lab

import (
	"testing"

	"go.uber.org/goleak"
)

// Every server, ticker and sampler the lab starts is gone when a test ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
