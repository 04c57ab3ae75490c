//go:build unix

package diskcost

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user and system) the process has used,
// for benchmarks: on a shared machine it is steadier than wall time,
// which includes time the process waited for a core. 0 where it cannot
// be read.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
