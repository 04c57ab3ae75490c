// Command ikbench runs informerkit's performance suite (package
// test/bench) against a real kube-apiserver and etcd and prints a markdown
// table of medians with informerkit's ratio to client-go's dynamicinformer
// and controller-runtime's cache.
//
//	go run ./test/bench/cmd/ikbench                 # N=10k,50k, 3 runs
//	go run ./test/bench/cmd/ikbench -sizes 2000 -runs 1 -many 10
//
// The control plane runs in a child process (this program started with
// -serve), so its heap, goroutines and garbage collection stay out of the
// measured process; both share the machine's CPUs.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apiserverfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/test/bench"
	"github.com/informerkit/informerkit/test/controlplane"
)

// serverInfo is what the child prints for the parent: how to reach its API
// server directly (no proxy).
type serverInfo struct {
	Host  string `json:"host"`
	Token string `json:"token"`
	// Etcd is the control plane's etcd client URL (-restart compacts it).
	Etcd string `json:"etcd"`
}

func main() {
	serve := flag.Bool("serve", false, "internal: run the control plane and print how to reach it")
	sizes := flag.String("sizes", "10000,50000", "object counts N, ascending")
	runs := flag.Int("runs", 3, "runs per scenario (tables show medians)")
	noWarmup := flag.Bool("no-warmup", false, "skip the discarded warm-up sync after loading each size")
	many := flag.Int("many", 100, "CRDs in the many-resources scenario (-1 skips it)")
	manyObjects := flag.Int("many-objects", 100, "objects per CRD in the many-resources scenario")
	manyLimits := flag.String("many-limits", "", "also run the many-resources scenario with informerkit factories whose MaxConcurrentInitialLists is each of these (-1: no bound), e.g. -1,50,4,1")
	manyOnly := flag.Bool("many-only", false, "run only the many-resources scenario")
	manyList := flag.Bool("many-list", false, "run the many-resources scenario over a plain LIST (WatchListClient off) too")
	writes := flag.Int("latency-writes", 400, "writes per latency measurement")
	rate := flag.Float64("write-rate", 50, "writes per second in the latency scenario")
	consumers := flag.String("consumers", "1,10,100", "consumer counts K of the sharing scenario")
	out := flag.String("o", "", "also write the table to this file")
	only := flag.String("impls", "", "comma-separated implementation names to run (default all; see bench.DefaultImpls)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measuring process to this file")
	cbor := flag.Bool("cbor", false, "serve CBOR (the API server's CBORServingAndStorage feature gate) and let client-go's clients ask for it (ClientsAllowCBOR, ClientsPreferCBOR): process-wide, so every dynamic client of the run, informerkit's included, then reads CBOR")
	isolate := flag.Bool("isolate", false, "take each implementation's initial sync, memory and query measurements in a fresh process (so no sync pays for, or profits from, the heap of the one before)")
	measureOne := flag.String("measure-one", "", "internal: take one -isolate measurement (JSON) and print its samples")
	noGzip := flag.Bool("disable-compression", false, "set rest.Config.DisableCompression for every client of the run (informerkit's and client-go's alike): the server then sends watch-list streams and large lists uncompressed")
	syncProfile := flag.String("sync-cpuprofile", "", "write a CPU profile of each timed initial sync (only the sync) to <prefix>-<implementation>-N<n>-<pid>.prof; with -isolate, in the child that syncs")
	memprofile := flag.String("memprofile", "", "write an allocation profile (alloc_space, alloc_objects) of the measuring process to this file at exit")
	restart := flag.Bool("restart", false, "run only the restart-from-disk scenario (bench.RunRestart: cold start with an empty CacheDir, a restart that resumes, one that diffs after an etcd compaction, client-go's cold start; the persistence cost per event) at -sizes, -runs times")
	restartEvents := flag.Int("restart-events", 2000, "with -restart: updates in the persistence-cost measurement (-1 skips it)")
	persistOnly := flag.Bool("persist-only", false, "with -restart: measure only the persistence cost (at the first of -sizes)")
	persistCompact := flag.Bool("persist-compact", false, "with -restart: measure the persistence cost with compact caches (Projection{Compact: true}) on both sides, whose objects are kept already encoded")
	persistProfile := flag.String("persist-cpuprofile", "", "with -restart: CPU-profile each persistence phase's window to PREFIX-on-rN.prof and PREFIX-off-rN.prof")
	persistWrite := flag.String("persist-write", "", "internal: send the persistence measurement's writes (JSON) from this process")
	persistSide := flag.String("persist-side", "", "internal: measure one side of the persistence cost (JSON) in this process")
	peak := flag.Bool("peak", false, "add the peak-memory scenario (each implementation's initial sync over WatchList and over LIST: heap and RSS high-water marks beside the settled cache)")
	peakOnly := flag.Bool("peak-only", false, "run only the peak-memory scenario")
	peakMemLimitRuns := flag.Int("peak-memlimit-runs", 0, "runs of the syncs under -peak-memlimit (0: -runs)")
	latencyOnly := flag.Bool("latency-only", false, "run only the event-latency scenario, at every one of -sizes (otherwise latency is measured at the first size only)")
	settleGC := flag.Bool("latency-settle-gc", false, "in the event-latency scenario, collect garbage once the handlers have seen the initial list, before the first write")
	handlers := flag.String("handlers", "1,10", "handler counts of the event-latency scenario")
	peakMemLimit := flag.Float64("peak-memlimit", 0, "with -peak or -peak-only: also measure each sync under a Go memory limit (GOMEMLIMIT) of this factor × its settled heap, e.g. 1.5")
	flag.Parse()
	if *serve {
		runServer(*cbor, *restart)
		return
	}
	if *persistSide != "" {
		persistSideChild(*persistSide)
		return
	}
	if *persistWrite != "" {
		persistWriteChild(*persistWrite)
		return
	}
	if *measureOne != "" {
		measureOneAndPrint(*measureOne)
		return
	}
	if *cbor {
		// What KUBE_FEATURE_ClientsAllowCBOR=true and
		// KUBE_FEATURE_ClientsPreferCBOR=true would do, had client-go not
		// read its environment before main.
		clientfeatures.ReplaceFeatureGates(cborGates{clientfeatures.FeatureGates()})
	}
	cfg := bench.Config{
		Sizes: ints(*sizes), Runs: *runs, ManyCRDs: *many, ManyObjects: *manyObjects,
		LatencyWrites: *writes, WriteRate: *rate, Handlers: ints(*handlers), Consumers: ints(*consumers), NoWarmup: *noWarmup, SyncCPUProfile: *syncProfile,
		Peak: *peak, PeakOnly: *peakOnly, PeakMemLimit: *peakMemLimit, PeakMemLimitRuns: *peakMemLimitRuns, ManyOnly: *manyOnly, LatencyOnly: *latencyOnly, LatencySettleGC: *settleGC,
		Logf: func(f string, a ...any) { log.Printf(f, a...) },
	}
	if *manyLimits != "" {
		cfg.ManyLimits = ints(*manyLimits)
	}
	if *manyList {
		cfg.ManyListModes = []bench.ListMode{bench.WatchList, bench.PlainList}
	}
	if *out != "" {
		cfg.Progress = func(r *bench.Results) { _ = os.WriteFile(*out+".partial", []byte(r.Markdown()), 0o644) }
	}
	for _, im := range bench.DefaultImpls() {
		if *only == "" || slices.Contains(strings.Split(*only, ","), im.Name) {
			cfg.Impls = append(cfg.Impls, im)
		}
	}
	for _, im := range bench.PerNamespaceImpls() { // by name only
		if slices.Contains(strings.Split(*only, ","), im.Name) {
			cfg.Impls = append(cfg.Impls, im)
		}
	}
	if len(cfg.Impls) == 0 {
		log.Fatalf("-impls %q matches no implementation", *only)
	}
	if *cbor {
		log.Printf("CBOR: client-go ClientsAllowCBOR=%v ClientsPreferCBOR=%v", clientfeatures.FeatureGates().Enabled(clientfeatures.ClientsAllowCBOR),
			clientfeatures.FeatureGates().Enabled(clientfeatures.ClientsPreferCBOR))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	rc, stop, err := startChild(ctx, *cbor, *restart)
	if err != nil {
		log.Fatal(err)
	}
	rc.DisableCompression = *noGzip
	if *isolate {
		cfg.MeasureCache = isolated(rc, *syncProfile)
		cfg.MeasurePeak = isolatedPeak(rc)
	}
	var types *contentTypes
	if *cbor {
		// Show that the responses were CBOR, not only that it was asked.
		types = &contentTypes{counts: map[string]int{}}
		rc.Wrap(types.wrap)
	}
	if *restart {
		if *cpuprofile != "" {
			log.Fatal("-cpuprofile does not apply to -restart: use -persist-cpuprofile")
		}
		os.Exit(runRestart(ctx, rc, stop, ints(*sizes), *runs, *restartEvents, *persistOnly, *persistCompact, *persistProfile, *out))
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	if *memprofile != "" {
		// Sample every 64 KiB allocated instead of every 512 KiB: the
		// profile is read per event and per object.
		runtime.MemProfileRate = 64 << 10
	}
	start := time.Now()
	res, err := bench.Run(ctx, rc, cfg)
	pprof.StopCPUProfile()
	if types != nil {
		log.Printf("CBOR: responses by content type: %v", types.snapshot())
	}
	if *memprofile != "" {
		writeMemProfile(*memprofile)
	}
	stop()
	if err != nil {
		log.Printf("run failed: %v", err)
	}
	if res == nil {
		os.Exit(1)
	}
	sizesText := *sizes
	if *manyOnly {
		sizesText = "none (-many-only)"
	}
	table := fmt.Sprintf("ikbench %s: GOMAXPROCS=%d, sizes=%s, runs=%d, many=%d×%d, latency %d writes at %.0f/s; took %v\n\n%s",
		time.Now().Format("2006-01-02"), runtime.GOMAXPROCS(0), sizesText, *runs, *many, *manyObjects, *writes, *rate,
		time.Since(start).Round(time.Second), res.Markdown())
	fmt.Println(table)
	if *out != "" {
		if werr := os.WriteFile(*out, []byte(table), 0o644); werr != nil {
			log.Print(werr)
		}
	}
	if err != nil {
		os.Exit(1)
	}
}

// writeMemProfile writes the allocation profile of everything allocated
// since the flag was read (pprof's alloc_space and alloc_objects sample
// types; inuse_* are the heap at exit).
func writeMemProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		log.Print(err)
		return
	}
	defer f.Close()
	runtime.GC() // the profile is as of the last GC
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		log.Print(err)
	}
}

// cborGates are client-go's feature gates with ClientsAllowCBOR and
// ClientsPreferCBOR on.
type cborGates struct{ base clientfeatures.Gates }

func (g cborGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.ClientsAllowCBOR || f == clientfeatures.ClientsPreferCBOR {
		return true
	}
	return g.base.Enabled(f)
}

// contentTypes counts the responses of a client by their Content-Type.
type contentTypes struct {
	mu     sync.Mutex // guards counts
	counts map[string]int
}

func (c *contentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			c.mu.Lock()
			c.counts[resp.Header.Get("Content-Type")]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

func (c *contentTypes) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			log.Fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

// runServer is the child: start the control plane, print serverInfo, run
// until stdin closes (the parent exited or stopped us).
//
// With restart (ikbench -restart) the API server runs without its watch
// cache (bench.RestartServerFlags).
func runServer(cbor, restart bool) {
	if cbor {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(apiserverfeatures.CBORServingAndStorage): true}); err != nil {
			log.Fatal(err)
		}
	}
	var opts controlplane.Options
	if restart {
		opts.ExtraFlags = bench.RestartServerFlags
	}
	cp, err := controlplane.Start(context.Background(), opts)
	if err != nil {
		log.Fatal(err)
	}
	direct := cp.DirectConfig()
	info := serverInfo{Host: direct.Host, Token: cp.Config().BearerToken, Etcd: strings.Join(cp.EtcdClient().Endpoints(), ",")}
	if err := json.NewEncoder(os.Stdout).Encode(info); err != nil {
		log.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	cp.Stop()
}

// startChild starts this program with -serve and returns a client config
// for its API server and a function that stops it.
func startChild(ctx context.Context, cbor, restart bool) (*rest.Config, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-serve", "-cbor="+strconv.FormatBool(cbor), "-restart="+strconv.FormatBool(restart))
	cmd.Stderr = io.Discard
	if os.Getenv("IKBENCH_SERVER_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("control plane did not start: %w", err)
	}
	var info serverInfo
	if err := json.Unmarshal(line, &info); err != nil {
		stop()
		return nil, nil, err
	}
	etcdEndpoints = info.Etcd
	return &rest.Config{
		Host:            info.Host,
		BearerToken:     info.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}, stop, nil
}

// oneMeasurement is what a -measure-one child measures.
type oneMeasurement struct {
	Host, Token string
	Impl        string
	Resource    bench.Resource
	N           int
	// SyncProfile is -sync-cpuprofile's prefix (Config.SyncCPUProfile).
	SyncProfile string `json:",omitempty"`
	// DisableCompression is the parent's rest.Config.DisableCompression.
	DisableCompression bool `json:",omitempty"`
	// Peak, if set, makes the measurement the peak scenario's
	// (bench.MeasurePeakOnce).
	Peak *bench.PeakCase `json:",omitempty"`
}

// isolated returns a Config.MeasureCache that runs each measurement in a
// child process of this binary.
func isolated(rc *rest.Config, syncProfile string) func(ctx context.Context, im bench.Impl, r bench.Resource, n int) ([]bench.Sample, error) {
	return func(ctx context.Context, im bench.Impl, r bench.Resource, n int) ([]bench.Sample, error) {
		return measureInChild(ctx, oneMeasurement{Host: rc.Host, Token: rc.BearerToken, Impl: im.Name, Resource: r, N: n, SyncProfile: syncProfile, DisableCompression: rc.DisableCompression})
	}
}

// isolatedPeak returns a Config.MeasurePeak that runs each measurement in
// a child process of this binary.
func isolatedPeak(rc *rest.Config) func(ctx context.Context, im bench.Impl, r bench.Resource, n int, pc bench.PeakCase) ([]bench.Sample, error) {
	return func(ctx context.Context, im bench.Impl, r bench.Resource, n int, pc bench.PeakCase) ([]bench.Sample, error) {
		return measureInChild(ctx, oneMeasurement{Host: rc.Host, Token: rc.BearerToken, Impl: im.Name, Resource: r, N: n, DisableCompression: rc.DisableCompression, Peak: &pc})
	}
}

// measureInChild runs this binary with -measure-one m and returns the
// samples it prints.
func measureInChild(ctx context.Context, m oneMeasurement) ([]bench.Sample, error) {
	arg, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-measure-one", string(arg))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("measuring %s in a child process: %w", m.Impl, err)
	}
	var samples []bench.Sample
	if err := json.Unmarshal(out, &samples); err != nil {
		return nil, fmt.Errorf("measuring %s in a child process: %w", m.Impl, err)
	}
	return samples, nil
}

// measureOneAndPrint is the -measure-one child: it takes one measurement
// and prints its samples as JSON on stdout.
func measureOneAndPrint(arg string) {
	var m oneMeasurement
	if err := json.Unmarshal([]byte(arg), &m); err != nil {
		log.Fatal(err)
	}
	im, ok := bench.ImplByName(m.Impl)
	if !ok {
		log.Fatalf("no implementation %q", m.Impl)
	}
	rc := childConfig(m.Host, m.Token)
	rc.DisableCompression = m.DisableCompression
	c := bench.Config{SyncCPUProfile: m.SyncProfile, Logf: func(f string, a ...any) { log.Printf(f, a...) }}
	var samples []bench.Sample
	var err error
	if m.Peak != nil {
		samples, err = bench.MeasurePeakOnce(context.Background(), rc, c, im, m.Resource, m.N, *m.Peak)
	} else {
		samples, err = bench.MeasureCacheOnce(context.Background(), rc, c, im, m.Resource, m.N)
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(samples); err != nil {
		log.Fatal(err)
	}
}
