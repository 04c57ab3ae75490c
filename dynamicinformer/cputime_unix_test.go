//go:build unix

package dynamicinformer

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used:
// on a shared machine it is steadier than wall time, which includes time
// the process waited for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
