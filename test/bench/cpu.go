package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far.
// The API server runs in another process (ikbench's child), so the
// difference across an initial sync is the informer side's own cost.
func processCPU() time.Duration {
	user, sys := processCPUSplit()
	return user + sys
}

// processCPUSplit is processCPU's user and system parts: the system part
// is mostly the kernel faulting in and zeroing the pages a growing heap
// touches.
func processCPUSplit() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
