package factorytest

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestPendingUntilCRDInstalled: an informer asked for before its CRD exists
// is Pending (no error, no spinning), then Synced once the CRD is
// installed, and its handler sees objects created after.
func TestPendingUntilCRDInstalled(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	group := unique("pending") + ".factory.example.com"
	crd := controlplane.NewCRD(group, "Widget", "widgets")
	gvr := controlplane.GVR(crd)
	cfg, counter := controlplane.CountRequests(cp.Config())
	f := newFactory(t, cfg)
	defer f.Shutdown()
	h := f.ForResource(gvr)
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var states []dynamicinformer.State
	f.OnStatusChange(func(s dynamicinformer.Status) {
		if s.GVR == gvr {
			mu.Lock()
			if len(states) == 0 || states[len(states)-1] != s.State {
				states = append(states, s.State)
			}
			mu.Unlock()
		}
	})
	f.Start(ctx)
	eventually(t, ctx, "Pending", func() bool {
		return h.Status().State == dynamicinformer.Pending && h.Status().Reason != "not started"
	})
	path := "/apis/" + group + "/"
	time.Sleep(3 * time.Second)
	if n := counter.Count("list", path) + counter.Count("watch", path); n > 2 {
		t.Fatalf("pending informer sent %d requests in 3s: %v", n, counter.Keys())
	}
	if h.Informer().HasSynced() {
		t.Fatal("pending informer reports HasSynced")
	}
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Synced after install", func() bool { return h.Status().State == dynamicinformer.Synced })
	ns := unique("pend")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 4, nil)
	eventually(t, ctx, "handler sees objects created after install", func() bool {
		objs, _, _, _ := rec.snapshot()
		return len(objs) == 4
	})
	mu.Lock()
	defer mu.Unlock()
	if states[0] != dynamicinformer.Pending || states[len(states)-1] != dynamicinformer.Synced {
		t.Fatalf("state sequence %v, want Pending ... Synced", states)
	}
}

// TestCRDRemovedAndRestored: deleting the CRD delivers a delete per object,
// empties the cache, says Removed, and sends no further requests; creating
// it again brings the informer back with the same handlers.
func TestCRDRemovedAndRestored(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	sc := scenario(t)
	sc.Injected("CRD with 6 objects deleted while watched, 10 s idle, then re-created and 2 objects written")
	gvr, name := installCRD(t, ctx)
	ns := unique("rm")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 6, nil)
	cfg, counter := controlplane.CountRequests(cp.Config())
	f := newFactory(t, cfg)
	defer f.Shutdown()
	h := f.ForResource(gvr)
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	eventually(t, ctx, "Synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	if err := cp.DeleteCRD(ctx, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Removed with an empty cache", func() bool {
		return h.Status().State == dynamicinformer.Removed && len(h.Informer().GetStore().ListKeys()) == 0
	})
	eventually(t, ctx, "a delete per object", func() bool {
		objs, _, _, deletes := rec.snapshot()
		return deletes == 6 && len(objs) == 0
	})
	st := h.Status()
	if !errors.Is(st.Err, dynamicinformer.ErrNotServed) {
		t.Fatalf("Removed status error %v, want ErrNotServed", st.Err)
	}
	path := "/apis/" + gvr.Group + "/"
	time.Sleep(time.Second) // let the removal settle
	before := counter.Count("list", path) + counter.Count("watch", path)
	time.Sleep(10 * time.Second)
	if after := counter.Count("list", path) + counter.Count("watch", path); after != before {
		t.Fatalf("removed informer kept requesting: %d -> %d (%v)", before, after, counter.Keys())
	}
	// Back again: same informer, same handler.
	crd := controlplane.NewCRD(gvr.Group, "Widget", "widgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Synced again", func() bool { return h.Status().State == dynamicinformer.Synced })
	createN(t, ctx, gvr, ns, 2, nil)
	eventually(t, ctx, "handler sees objects of the restored CRD", func() bool {
		objs, _, _, _ := rec.snapshot()
		return len(objs) == 2
	})
	_, adds, _, deletes := rec.snapshot()
	sc.Held("a delete per object (%d), cache empty, state Removed (ErrNotServed), 0 list/watch requests in 10 s; same informer and handler Synced again after re-creation (%d adds in all)", deletes, adds)
}

// TestCRDCycleNoGoroutineGrowth: 8 (20 with INFORMERKIT_LONG)
// delete/re-create cycles of a watched CRD end with the informer synced
// and no goroutine growth.
func TestCRDCycleNoGoroutineGrowth(t *testing.T) {
	goroutines := controlplane.Parallel(t)
	cycles := controlplane.Sized(8, 20)
	ctx := ctxT(t, 20*time.Minute)
	sc := scenario(t)
	sc.Injected("a watched CRD deleted and re-created %d times in a row", cycles)
	gvr, name := installCRD(t, ctx)
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	h := f.ForResource(gvr)
	f.Start(ctx)
	eventually(t, ctx, "Synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	// This test's goroutines only (they carry its label): the informer's,
	// the reflector's, client-go's for it; not other tests'.
	base := goroutines.Running()
	var removal, resume []time.Duration
	for i := 0; i < cycles; i++ {
		start := time.Now()
		if err := cp.DeleteCRD(ctx, name); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "Removed", func() bool { return h.Status().State == dynamicinformer.Removed })
		removal = append(removal, time.Since(start))
		if err := cp.InstallCRD(ctx, controlplane.NewCRD(gvr.Group, "Widget", "widgets")); err != nil {
			t.Fatal(err)
		}
		start = time.Now() // InstallCRD returns once the CRD is established and served
		eventually(t, ctx, "Synced", func() bool { return h.Status().State == dynamicinformer.Synced })
		resume = append(resume, time.Since(start))
	}
	slices.Sort(removal)
	slices.Sort(resume)
	t.Logf("%d cycles: delete→Removed median %v max %v; served→Synced median %v max %v", cycles,
		removal[cycles/2].Round(time.Millisecond), removal[cycles-1].Round(time.Millisecond),
		resume[cycles/2].Round(time.Millisecond), resume[cycles-1].Round(time.Millisecond))
	// Connections and watch streams of the last cycle may still be
	// winding down: allow a small margin, not per-cycle growth.
	var now int
	for i := 0; i < 50; i++ {
		if now = goroutines.Running(); now <= base+2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if now > base+2 {
		t.Fatalf("the test's goroutines grew from %d to %d over %d CRD cycles", base, now, cycles)
	}
	t.Logf("the test's goroutines: %d before, %d after %d cycles", base, now, cycles)
	sc.Held("Removed then Synced in every cycle: delete→Removed median %v (max %v), served→Synced median %v (max %v); the test's goroutines %d before, %d after",
		removal[cycles/2].Round(time.Millisecond), removal[cycles-1].Round(time.Millisecond),
		resume[cycles/2].Round(time.Millisecond), resume[cycles-1].Round(time.Millisecond), base, now)
}

// informerGoroutines counts goroutines running informerkit code or a
// client-go reflector/informer on behalf of it (the API server in this
// process runs its own informers; those are filtered out by requiring an
// informerkit frame or a client-go cache frame created by informerkit).
func informerGoroutines() int {
	buf := make([]byte, 8<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) { // truncated: the in-process API server runs thousands
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	count := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "github.com/informerkit/informerkit/dynamicinformer") {
			count++
		}
	}
	return count
}
