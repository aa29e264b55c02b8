//go:build unix

package transcript

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used. On a
// shared machine it is a steadier per-op figure than wall time, which
// includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds a cpu-ms/op metric measured since start.
func reportCPU(b *testing.B, start time.Duration) {
	if start == 0 {
		return
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
