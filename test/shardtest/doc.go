// Package shardtest checks sharded informers (dynamicinformer.WithShard)
// against a real kube-apiserver with its ShardedListAndWatch feature gate
// on and off. The gate is process-global, so each test starts its own
// control plane, one after the other (the test server resets the gate
// when it stops); tests of this package must not run in parallel.
package shardtest
