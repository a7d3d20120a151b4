package sluice_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The composition tests wait in real limiters' queues; no goroutine may
// outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
