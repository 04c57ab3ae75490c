package diskcost

import "syscall"

// Supported: this platform reads a thread's CPU time.
const Supported = true

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
