//go:build !linux

package diskcost

// Supported: this platform reads a thread's CPU time.
const Supported = false

func threadCPU() int64 { return 0 }
