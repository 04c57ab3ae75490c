// Package diskcost measures, when a benchmark turns it on, the CPU time
// an informer's persistence spends (dynamicinformer's Options.CacheDir:
// its journal's writes, its syncs and its folds), on the
// goroutine that spends it: the thread's CPU time (Linux
// CLOCK_THREAD_CPUTIME_ID) around each call, the goroutine locked to its
// thread meanwhile. ProcessCPU, for benchmarks, reads the whole
// process's. The persistence cost is then read
// directly instead of as the difference of two process-wide figures,
// whose run-to-run spread (garbage collection of a large cache) is wider
// than the cost. Off, a call costs one atomic load. Where thread CPU time
// cannot be read, Supported is false and nothing is counted. Every
// function is safe for concurrent use; the counts are process-wide (one
// measurement at a time).
package diskcost

import (
	"runtime"
	"sync/atomic"
)

var (
	on           atomic.Bool
	calls, nanos atomic.Int64
)

// Enable turns the measurement on or off.
func Enable(b bool) { on.Store(b && Supported) }

// Reset zeroes the counts.
func Reset() { calls.Store(0); nanos.Store(0) }

// Read returns the journal calls measured and their CPU time in
// nanoseconds.
func Read() (n, ns int64) { return calls.Load(), nanos.Load() }

// Start begins measuring one journal call; the function it returns ends
// it. Nil when the measurement is off.
func Start() (stop func()) {
	if !on.Load() {
		return nil
	}
	runtime.LockOSThread()
	c0 := threadCPU()
	return func() {
		nanos.Add(threadCPU() - c0)
		calls.Add(1)
		runtime.UnlockOSThread()
	}
}
