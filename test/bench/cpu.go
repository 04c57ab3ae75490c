package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// usage is what the kernel counts for this process: CPU time split into
// user and system parts, minor page faults and context switches. The API
// server runs in another process (ikbench's child), so the difference
// across an initial sync is the informer side's own cost.
type usage struct {
	user, sys              time.Duration
	faults                 int64 // minor page faults: pages of a growing heap faulted in and zeroed
	voluntary, involuntary int64 // context switches: blocked (futex, network wait) and preempted
}

// processUsage is this process's usage so far (zero where getrusage fails).
func processUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{
		user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()),
		faults: ru.Minflt, voluntary: ru.Nvcsw, involuntary: ru.Nivcsw,
	}
}

// since is u minus an earlier snapshot.
func (u usage) since(before usage) usage {
	return usage{
		user: u.user - before.user, sys: u.sys - before.sys,
		faults: u.faults - before.faults, voluntary: u.voluntary - before.voluntary, involuntary: u.involuntary - before.involuntary,
	}
}

// cpu is user plus system time.
func (u usage) cpu() time.Duration { return u.user + u.sys }

// perObject describes u per object for the log: the system part of the
// CPU, and where it may come from.
func (u usage) perObject(n int) string {
	if n <= 0 {
		n = 1
	}
	f := float64(n)
	return fmt.Sprintf("system %v, %.2f faults, %.2f voluntary and %.2f involuntary switches per object",
		(u.sys / time.Duration(n)).Round(100*time.Nanosecond), float64(u.faults)/f, float64(u.voluntary)/f, float64(u.involuntary)/f)
}

// startSyncProfile starts a CPU profile of one sync when prefix is set
// (Config.SyncCPUProfile) and returns what ends it.
func startSyncProfile(prefix, impl string, n int) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	return startCPUProfile(fmt.Sprintf("%s-%s-N%d-%d.prof", prefix, strings.NewReplacer(" ", "_", ":", "", "/", "_").Replace(impl), n, os.Getpid()))
}

// startCPUProfile starts a CPU profile written to path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
