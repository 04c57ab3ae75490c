package diskcost

import (
	"syscall"
	"unsafe"
)

// Supported: this platform reads a thread's CPU time.
const Supported = true

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// threadCPU is the calling thread's CPU time (user and system), in ns.
// clock_gettime(CLOCK_THREAD_CPUTIME_ID) brings the running thread's
// scheduler account up to date; getrusage(RUSAGE_THREAD) reads it as of
// the last tick or context switch, so a call shorter than a tick could
// measure 0 (a 4× undercount of the journal's cost was measured so).
func threadCPU() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return ts.Nano()
}
