// Package bench is informerkit's performance suite: scenario
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
// to each peer, and the initial sync's ratios run by run (Results.RunRatios:
// each run's sample over the peer's sample of the same run). The command
// test/bench/cmd/ikbench starts the control plane in a child process (so
// the API server's heap and GC stay out of the measured process) and
// prints the table; TestBenchShort runs a small
// configuration under `go test -race` so the code cannot rot.
//
// RunRestart (ikbench -restart) measures restart from disk
// (dynamicinformer Options.CacheDir) side by side with client-go's cold
// start: a cold start on an empty directory, a restart that resumes its
// watch, one that lists after a 410 (etcd compacted), each with its time
// to Synced, the bytes received and the lists sent, and the persistence
// cost per event while running; TestRestartShort runs it small under
// -race.
//
// With Config.Peak (ikbench -peak, -peak-only) Run also measures each
// initial sync's peak memory in the informer's process (peak.go, RowPeak:
// the heap's high-water mark from runtime/metrics, VmHWM, the settled heap
// and RSS) over WatchList and over a plain LIST; TestPeakShort runs it small.
//
// ikbench's -isolate takes each implementation's sync, heap and query
// measurements in a child process of its own (the warm-up too, discarded:
// the first process to grow a heap after the load pays more per page
// fault); -sync-cpuprofile profiles each timed sync; the log gives the
// system CPU, page faults and context switches per synced object.
//
// Numbers from this package are only meaningful as ratios within one run:
// see docs/PERFORMANCE.md for a recorded run and its machine.
package bench
