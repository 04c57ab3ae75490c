package soaktest

import (
	"os"
	"testing"

	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

// The ShardedListAndWatch gate lets the server filter each shard member's
// requests. Without the watch cache for configmaps a watch from a
// compacted revision reaches etcd and gets 410 Gone (the compaction
// fault's point); the CRDs keep their watch cache, the other path.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{ExtraFlags: []string{
		"--feature-gates=ShardedListAndWatch=true",
		"--watch-cache-sizes=configmaps#0",
	}}, &cp))
}
