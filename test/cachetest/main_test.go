// Package cachetest checks informerkit's cache transforms, label index and
// genericlister against a real kube-apiserver.
package cachetest

import (
	"os"
	"testing"

	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp)) }
