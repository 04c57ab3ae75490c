package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// RunTests is for TestMain: it starts a ControlPlane, stores it in *cp, runs
// the package's tests and stops the control plane. It returns the exit code
// for os.Exit. A control plane that cannot start fails the package (it is
// never skipped silently).
//
//	var cp *controlplane.ControlPlane
//	func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp)) }
func RunTests(m *testing.M, opts Options, cp **ControlPlane) int {
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
	c.Stop()
	if err := writeReport(); err != nil {
		fmt.Fprintf(os.Stderr, "reliability report: %v\n", err)
		code = 1
	}
	return code
}
