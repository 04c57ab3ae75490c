// Package bench is informerkit's performance suite (issue 9): scenario
// runners that measure informerkit's dynamicinformer factory (default
// options and each memory option) side by side with client-go's
// dynamicinformer and controller-runtime's cache, against a real
// kube-apiserver, in one run on the same server state.
//
// Run builds every implementation in turn (alone in the process, torn down
// and garbage-collected before the next), records initial sync time, heap
// per object, event latency, lister query cost, request counts with K
// consumers and the cost of many small resources, and returns Results;
// Results.Markdown prints the medians with each informerkit variant's ratio
// to each peer. The command test/bench/cmd/ikbench starts the control plane
// in a child process (so the API server's heap and GC stay out of the
// measured process) and prints the table; TestBenchShort runs a small
// configuration under `go test -race` so the code cannot rot.
//
// Numbers from this package are only meaningful as ratios within one run:
// see docs/PERFORMANCE.md for a recorded run and its machine.
package bench
