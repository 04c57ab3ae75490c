package controlplane

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// RunTests is for TestMain: it starts a ControlPlane, stores it in *cp, runs
// the package's tests (SideBySide of them at once) and stops the control
// plane. It returns the exit code
// for os.Exit. A control plane that cannot start fails the package (it is
// never skipped silently).
//
//	var cp *controlplane.ControlPlane
//	func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp)) }
func RunTests(m *testing.M, opts Options, cp **ControlPlane) int {
	SideBySide()
	if opts.Logf == nil && os.Getenv("CONTROLPLANE_VERBOSE") != "" {
		opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "controlplane: "+f+"\n", a...) }
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: cannot start: %v\n", err)
		return 1
	}
	*cp = c
	code := m.Run()
	// Each test checks its own goroutines; this catches what no test
	// tracked (a goroutine started outside any test's tree).
	if left := CheckNoGoroutinesLeft(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "informerkit goroutines left after all tests (%d stacks):\n%s\n", len(left), strings.Join(left, "\n\n"))
		code = 1
	}
	c.Stop()
	if err := writeReport(); err != nil {
		fmt.Fprintf(os.Stderr, "reliability report: %v\n", err)
		code = 1
	}
	return code
}

// LongEnv names the environment variable that selects the long versions of
// the load, soak, property and benchmark tests (INFORMERKIT_LONG=1). Unset,
// as in the README's test command, they run short versions that still
// check every count and every answer, on fewer objects, for less time.
const LongEnv = "INFORMERKIT_LONG"

// Long reports whether LongEnv is set: pick the long version's sizes.
func Long() bool { return os.Getenv(LongEnv) != "" }

// Sized returns long when LongEnv is set, short otherwise.
func Sized[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}

// TestsAtOnce is how many of a package's parallel tests (Parallel) run at
// once on its control plane: they spend most of their time waiting on the
// server, so more than the machine's cores.
const TestsAtOnce = 8

// TestsGCPercent is the garbage collector's target percentage in a test
// binary that runs a control plane (SideBySide sets it). The in-process
// API server and etcd allocate most of what such a process does, and the
// machine's memory is not what limits the suite: at 300 the collector
// runs a third as often, which cut a package's CPU time by about a sixth
// (test/crcachetest: 35.2 s of user CPU at Go's default of 100, 29.7 s at
// 300). Heap figures the tests check are read after runtime.GC (the live
// heap), which the percentage does not change. A GOGC set in the
// environment wins.
const TestsGCPercent = 300

// SideBySide sets go test's -test.parallel to TestsAtOnce for this test
// binary; a -parallel on the command line still wins. It also sets the
// garbage collector's percentage to TestsGCPercent unless GOGC is set.
// Call it in TestMain before m.Run (RunTests does). The value is set
// without marking the flag as given, and not on the command line, because
// a command-line -parallel reaches every package, and Ginkgo's runner
// refuses to run when it was given.
func SideBySide() {
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set(strconv.Itoa(TestsAtOnce))
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(TestsGCPercent)
	}
}
