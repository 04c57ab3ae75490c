package factorytest

import "github.com/informerkit/informerkit/test/controlplane"

// scenario starts the reliability-report row of the running test
// (controlplane.Scenario; docs/RELIABILITY.md).
var scenario = controlplane.Scenario
