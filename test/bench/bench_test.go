package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/test/controlplane"
)

// TestBenchShort runs the whole suite at N=300 (2000 with INFORMERKIT_LONG), once, against a real API
// server in this process, so the benchmark code cannot rot. It asserts the
// facts the numbers rest on, never timings: every informer synced exactly N
// objects and every handler saw every write (Run's sanity checks), one watch
// per GVR however many consumers, latencies recorded, every ratio computed,
// and no goroutine of the suite left behind.
func TestBenchShort(t *testing.T) {
	// Side by side with TestRestartShort (each on its own API server);
	// TestPeakShort, which sets a process-wide memory limit, runs alone
	// before them.
	leaks := controlplane.Parallel(t)
	ctx, cp := startServer(t, 30*time.Minute)

	// Scaled down: one handler count, two consumer counts, a few CRDs.
	// The default (short) run checks every row, count and ratio on 300
	// objects, K=1 and K=20, 3 CRDs (about a minute under -race);
	// INFORMERKIT_LONG=1 runs N=2000, K=1 and K=100, 5 CRDs (about four
	// minutes on a quiet machine).
	n := controlplane.Sized(300, 2000)
	consumers := controlplane.Sized([]int{1, 20}, []int{1, 100})
	cfg := Config{
		Sizes: []int{n}, Runs: 1,
		LatencyWrites: controlplane.Sized(10, 20), WriteRate: 40, Handlers: []int{1},
		Consumers: consumers,
		ManyCRDs:  controlplane.Sized(3, 5), ManyObjects: 10,
		Logf: t.Logf,
	}
	res, err := Run(ctx, cp.Config(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	impls := cfg.Defaults().Impls

	for _, k := range consumers {
		cs := fmt.Sprintf("K=%d, N=%d", k, n)
		for _, im := range impls {
			if im.SyncOnly {
				continue
			}
			w, ok := res.Median(RowSharing, cs, "watches", im.Name)
			if !ok {
				t.Errorf("%s %s: no watch count", im.Name, cs)
				continue
			}
			if !im.Peer && w != 1 {
				t.Errorf("%s %s: %v watches, want exactly 1", im.Name, cs, w)
			}
			t.Logf("%s %s: %v watches", im.Name, cs, w)
		}
	}
	for _, cs := range []string{fmt.Sprintf("1 handler(s), N=%d", n)} {
		for _, im := range impls {
			if im.SyncOnly {
				continue
			}
			for _, m := range []string{"p50", "p99"} {
				if v, ok := res.Median(RowLatency, cs, m, im.Name); !ok || !(v > 0) {
					t.Errorf("%s %s %s latency = %v (recorded %v), want > 0", im.Name, cs, m, v, ok)
				}
			}
		}
	}
	// Every informerkit figure has a ratio to every peer (counts that a
	// peer may legitimately have as 0, such as lists, aside).
	seen := map[[3]string]bool{}
	for _, s := range res.Samples {
		key := [3]string{s.Row, s.Case, s.Metric}
		if seen[key] || s.Metric == "lists" {
			continue
		}
		seen[key] = true
		for _, im := range impls {
			if im.Peer || im.SyncOnly && s.Row != RowSync || im.WidgetOnly && s.Row == RowMany {
				continue
			}
			for _, p := range impls {
				if !p.Peer || p.WidgetOnly && s.Row == RowMany {
					continue
				}
				if x, ok := res.Ratio(s.Row, s.Case, s.Metric, im.Name, p.Name); !ok || math.IsNaN(x) || math.IsInf(x, 0) {
					t.Errorf("no ratio %s / %s for %v", im.Name, p.Name, key)
				}
			}
		}
	}
	// Every implementation, the limit row too, has its sync time and the
	// client CPU it took.
	for _, im := range impls {
		for _, m := range []string{"sync", "client CPU"} {
			if v, ok := res.Median(RowSync, fmt.Sprintf("N=%d", n), m, im.Name); !ok || !(v > 0) {
				t.Errorf("%s: initial sync %s = %v (recorded %v), want > 0", im.Name, m, v, ok)
			}
		}
	}
	md := res.Markdown()
	for _, row := range []string{RowSync, RowMemory, RowLatency, RowQuery, RowSharing, RowMany} {
		if !strings.Contains(md, row) {
			t.Errorf("table lacks %q", row)
		}
	}
	t.Log("\n" + md)
	leaks.VerifyNoLeaks(t)
}

// checkNoLeftovers fails if goroutines running the suite's or
// informerkit's code outlive Run (the API server's own come and go),
// whoever started them: for a test that runs alone (the parallel ones
// check their own goroutines, controlplane.Parallel).
func checkNoLeftovers(t *testing.T) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		left = left[:0]
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "testing.(*T).Run") {
				continue
			}
			if strings.Contains(g, "informerkit/informerkit/test/bench.") ||
				strings.Contains(g, "informerkit/informerkit/dynamicinformer.") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, g := range left {
		t.Errorf("goroutine left behind:\n%s", g)
	}
}

func TestResultsMedianAndRatio(t *testing.T) {
	r := &Results{Impls: []Impl{{Name: "a"}, {Name: "b", Peer: true}}}
	for _, v := range []float64{3, 1, 2} {
		r.add("row", "case", "m", "ms", "a", v)
	}
	for _, v := range []float64{4, 8} {
		r.add("row", "case", "m", "ms", "b", v)
	}
	if m, ok := r.Median("row", "case", "m", "a"); !ok || m != 2 {
		t.Errorf("median a = %v, %v; want 2", m, ok)
	}
	if m, ok := r.Median("row", "case", "m", "b"); !ok || m != 6 {
		t.Errorf("median b = %v, %v; want 6", m, ok)
	}
	if x, ok := r.Ratio("row", "case", "m", "a", "b"); !ok || math.Abs(x-1.0/3) > 1e-9 {
		t.Errorf("ratio = %v, %v; want 1/3", x, ok)
	}
	if _, ok := r.Ratio("row", "case", "m", "a", "missing"); ok {
		t.Error("ratio to a missing implementation reported ok")
	}
	md := r.Markdown()
	if !strings.Contains(md, "| a | 2.00 · 0.33× |") || !strings.Contains(md, "| b | 6.00 |") {
		t.Errorf("unexpected table:\n%s", md)
	}
	if _, ok := r.RunRatios("row", "case", "m", "a", "b"); ok {
		t.Error("run ratios of 3 samples over 2 reported ok")
	}
}

// Run by run, each sample is paired with the peer's of the same run: a
// machine that slows down between runs moves both.
func TestRunRatios(t *testing.T) {
	r := &Results{Impls: []Impl{{Name: "ik"}, {Name: "cg", Peer: true}}}
	for _, v := range [][2]float64{{1, 4}, {3, 6}, {2, 10}} { // the machine's speed drifts run to run
		r.add(RowSync, "N=1", "client CPU", "µs", "ik", v[0])
		r.add(RowSync, "N=1", "client CPU", "µs", "cg", v[1])
	}
	got, ok := r.RunRatios(RowSync, "N=1", "client CPU", "ik", "cg")
	if want := []float64{0.2, 0.25, 0.5}; !ok || !slices.Equal(got, want) {
		t.Errorf("run ratios %v, %v; want %v", got, ok, want)
	}
	if x, _ := r.Ratio(RowSync, "N=1", "client CPU", "ik", "cg"); x != 2.0/6 {
		t.Errorf("ratio of medians %v, want 1/3", x)
	}
	md := r.Markdown()
	if !strings.Contains(md, "run by run") || !strings.Contains(md, "| ik | 0.25× (0.20–0.50) |") {
		t.Errorf("no run-by-run table:\n%s", md)
	}
}

// TestLatencyOnlyEverySize runs the latency-only mode (ikbench
// -latency-only) at two sizes against a real API server: each
// implementation has p50 and p99 at each size, and no other scenario ran.
func TestLatencyOnlyEverySize(t *testing.T) {
	// Side by side with the others, on its own API server: it checks that
	// each latency was recorded, not how large it was.
	leaks := controlplane.Parallel(t)
	ctx, cp := startServer(t, 15*time.Minute)
	var impls []Impl
	for _, im := range DefaultImpls() {
		if im.Name == InformerKit || im.Name == ClientGo {
			impls = append(impls, im)
		}
	}
	cfg := Config{Sizes: []int{50, 200}, Runs: 1, LatencyOnly: true, LatencySettleGC: true, LatencyWrites: 10, WriteRate: 40, Handlers: []int{1},
		Impls: impls, NoWarmup: true, Logf: t.Logf}
	res, err := Run(ctx, cp.Config(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.Sizes {
		cs := fmt.Sprintf("1 handler(s), N=%d", n)
		for _, im := range impls {
			for _, m := range []string{"p50", "p99"} {
				if v, ok := res.Median(RowLatency, cs, m, im.Name); !ok || !(v > 0) {
					t.Errorf("%s %s %s latency = %v (recorded %v), want > 0", im.Name, cs, m, v, ok)
				}
			}
		}
	}
	for _, s := range res.Samples {
		if s.Row != RowLatency {
			t.Errorf("a sample of another scenario: %+v", s)
		}
	}
	leaks.VerifyNoLeaks(t) // its goroutines (labelled), not the parallel tests'
}

// startServer starts a real API server for the test (skipped with
// -short); it and the returned context (which ends after timeout) end
// with the test.
func startServer(t *testing.T, timeout time.Duration) (context.Context, *controlplane.ControlPlane) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	return ctx, cp
}
