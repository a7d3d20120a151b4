//go:build unix

package bench

import (
	"syscall"
	"testing"
)

// cpuNanos is the CPU time the process has used, user and system.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU adds cpu-ns/op, the process's CPU time per operation since
// start: on a machine shared with other work, time spent waiting for a
// core counts in ns/op but not here, so two libraries compared side by
// side on a loaded machine differ less by luck.
func reportCPU(b *testing.B, start int64) {
	if now := cpuNanos(); start >= 0 && now >= 0 && b.N > 0 {
		b.ReportMetric(float64(now-start)/float64(b.N), "cpu-ns/op")
	}
}
