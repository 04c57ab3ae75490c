// Package resolvertest checks discoveryresolver against a real
// kube-apiserver: every reference form kubectl accepts (compared with
// kubectl's own RESTMapper stack), CRDs installed and removed while the
// resolver runs, partial discovery failure, and the request cost of misses.
package resolvertest

import (
	"os"
	"testing"

	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp)) }
