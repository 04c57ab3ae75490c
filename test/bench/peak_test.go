package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/test/controlplane"
)

// TestPeakShort runs the peak-memory scenario at N=200 (500 with
// INFORMERKIT_LONG), once, against a
// real API server in this process, so its code cannot rot. It asserts
// facts, never amounts: every implementation synced exactly N objects in
// each list mode with that mode's requests (a LIST sync sent a list
// request; a WatchList sync none, but for the informers over several
// namespaces, which cannot stream), every
// metric was recorded with a ratio to every peer, the heap's high-water
// mark is above zero, and no goroutine of the suite is left behind.
func TestPeakShort(t *testing.T) {
	ctx, cp := startServer(t, 15*time.Minute)

	n := controlplane.Sized(200, 500)
	cfg := Config{Sizes: []int{n}, Runs: 1, PeakOnly: true, ManyCRDs: -1, PeakMemLimit: 1.5, Logf: t.Logf}
	res, err := Run(ctx, cp.Config(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	impls := PeakImpls(cfg.Defaults().Impls)
	if len(impls) != 7 {
		t.Errorf("%d peak implementations, want 7 (5 informerkit modes, client-go, controller-runtime)", len(impls))
	}
	for _, mode := range ListModes {
		cs := fmt.Sprintf("N=%d, %s", n, mode)
		for _, im := range impls {
			lists, _ := res.Median(RowPeak, cs, "list requests", im.Name)
			if want := mode == PlainList || im.Name == InformerKitNamespaces; (lists > 0) != want {
				t.Errorf("%s %s: %v list requests", im.Name, cs, lists)
			}
			for _, m := range []string{"peak heap", "settled heap", "peak/settled heap", "peak RSS", "settled RSS", "sync"} {
				v, ok := res.Median(RowPeak, cs, m, im.Name)
				if !ok {
					t.Errorf("%s %s: no %s", im.Name, cs, m)
					continue
				}
				if m != "settled heap" && m != "peak/settled heap" && !(v > 0) {
					t.Errorf("%s %s: %s = %v, want > 0", im.Name, cs, m, v)
				}
				if im.Peer {
					continue
				}
				for _, p := range impls {
					if _, ok := res.Ratio(RowPeak, cs, m, im.Name, p.Name); p.Peer && !ok && m != "settled heap" && m != "peak/settled heap" {
						t.Errorf("no ratio %s / %s for %s %s", im.Name, p.Name, cs, m)
					}
				}
			}
		}
	}
	// Under the memory limit every sync completes and says its limit.
	for _, mode := range ListModes {
		cs := PeakCase{Mode: mode, MemLimitFactor: 1.5}.caseName(n)
		for _, im := range impls {
			for _, m := range []string{"memory limit", "sync", "peak heap"} {
				if v, ok := res.Median(RowPeak, cs, m, im.Name); !ok || !(v > 0) {
					t.Errorf("%s %s: %s = %v (%v), want > 0", im.Name, cs, m, v, ok)
				}
			}
		}
	}
	t.Log("\n" + res.Markdown())
	checkNoLeftovers(t)
}

// The peak table has a row for the implementation only it measures
// (InformerKitNamespaces, after informerkit's) and every sample
// MeasurePeak returns, run after run, in both list modes.
func TestPeakTableRows(t *testing.T) {
	c := Config{Runs: 2, Impls: DefaultImpls(), PeakMemLimit: 1.5}.Defaults()
	var calls []string
	type implMode struct {
		impl string
		mode ListMode
	}
	limited := map[implMode]uint64{}
	c.MeasurePeak = func(_ context.Context, im Impl, _ Resource, n int, pc PeakCase) ([]Sample, error) {
		calls = append(calls, im.Name+" "+pc.caseName(n))
		if pc.MemLimitFactor > 0 {
			limited[implMode{im.Name, pc.Mode}] = pc.SettledHeap
		}
		return []Sample{
			{Row: RowPeak, Case: pc.caseName(n), Metric: "peak heap", Unit: "MiB", Impl: im.Name, Value: 1},
			{Row: RowPeak, Case: pc.caseName(n), Metric: "settled heap", Unit: "MiB", Impl: im.Name, Value: float64(len(calls))},
		}, nil
	}
	res := &Results{Impls: c.Impls}
	if err := measurePeaks(context.Background(), nil, c, res, Resource{}, 10); err != nil {
		t.Fatal(err)
	}
	calls = calls[:0]
	clear(limited)
	if err := measurePeaks(context.Background(), nil, c, res, Resource{}, 10); err != nil { // a second size
		t.Fatal(err)
	}
	if n := slices.IndexFunc(res.Impls[2:], func(im Impl) bool { return im.Name == InformerKitNamespaces }); n >= 0 {
		t.Errorf("%s listed twice after two sizes: %v", InformerKitNamespaces, res.Impls)
	}
	// Two runs in two modes without a limit, then the same under one.
	if want := 2 * 2 * 2 * 7; len(calls) != want {
		t.Errorf("%d measurements, want %d: %v", len(calls), want, calls)
	}
	if len(limited) != 2*7 {
		t.Errorf("%d implementations and modes measured under a limit, want 14: %v", len(limited), limited)
	}
	for k, settled := range limited {
		want, _ := res.Median(RowPeak, PeakCase{Mode: k.mode}.caseName(10), "settled heap", k.impl)
		if settled != uint64(want*(1<<20)) {
			t.Errorf("%v under a limit: settled heap %d, want the median without one, %v MiB", k, settled, want)
		}
	}
	if len(res.Impls) < 2 || res.Impls[0].Name != InformerKit || res.Impls[1].Name != InformerKitNamespaces {
		t.Errorf("implementations %v: want %s right after %s", res.Impls, InformerKitNamespaces, InformerKit)
	}
	md := res.Markdown()
	if !strings.Contains(md, "| "+InformerKitNamespaces+" | 1.00 · 1.00×") {
		t.Errorf("no row for %s:\n%s", InformerKitNamespaces, md)
	}
}
