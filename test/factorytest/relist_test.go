package factorytest

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestPeriodicRelist: WithRelistPeriod(2s) sends a real LIST of the
// resource again and again (counted at the transport), the informer stays
// Synced throughout, follows the server's writes, and repairs drift: an
// object removed from its cache behind its back (an event it missed) comes
// back with an add, and an object the server never had (a delete it
// missed) goes with a delete. An informer without the option lists once.
func TestPeriodicRelist(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	sc := scenario(t)
	ns := unique("relist")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crd, _ := installCRD(t, ctx)
	createN(t, ctx, crd, ns, 5, nil)
	cfg, counter := controlplane.CountRequests(cp.Config())
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cfg)
	defer f.Shutdown()
	h := f.ForResource(crd, dynamicinformer.WithNamespaces(ns), dynamicinformer.WithRelistPeriod(2*time.Second))
	plain := f.ForResource(crd, dynamicinformer.WithNamespaces(ns), dynamicinformer.WithSharingKey("no relist"))
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	synced := false
	var after []dynamicinformer.State // states after the first Synced
	defer f.OnStatusChange(func(s dynamicinformer.Status) {
		if s.GVR != crd || len(s.Namespaces) != 1 || s.State == dynamicinformer.Stopped {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if synced && s.State != dynamicinformer.Synced {
			after = append(after, s.State)
		}
		synced = synced || s.State == dynamicinformer.Synced
	})()
	started := time.Now()
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Informer().HasSynced() && plain.Informer().HasSynced() })
	path := "/namespaces/" + ns + "/" + crd.Resource
	lists0 := counter.Count("list", path)

	// Drift: the cache loses w-0 and gains a ghost.
	idx := h.Informer().GetIndexer()
	w0, ok, err := idx.GetByKey(ns + "/w-0")
	if !ok || err != nil {
		t.Fatalf("w-0 not cached: %v", err)
	}
	if err := idx.Delete(w0); err != nil {
		t.Fatal(err)
	}
	ghost := obj(crd.GroupVersion().String(), "Widget", ns, "ghost", nil)
	ghost.SetResourceVersion("1")
	if err := idx.Add(ghost); err != nil {
		t.Fatal(err)
	}
	rec.OnAdd(ghost, false) // the handler believed it too
	// The server changes meanwhile.
	dyn := cp.Dynamic().Resource(crd).Namespace(ns)
	if err := dyn.Delete(ctx, "w-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n := convergedResource(t, ctx, h, rec, crd, ns)
	repaired := time.Now()
	_, adds, _, deletes := rec.snapshot()
	if counter.Count("list", path) == lists0 {
		t.Fatal("converged without a relist: the drift was not there")
	}

	// Keep watching the relists go by. Each one waits for the reflector's
	// back-off (800 ms doubling, with jitter, while relists come less than
	// 2 min apart), so with a 2 s period the third list is due within
	// about 18 s of the start.
	for counter.Count("list", path)-lists0 < 3 && time.Since(started) < 25*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	lists, took := counter.Count("list", path)-lists0, time.Since(started).Round(100*time.Millisecond)
	if lists < 3 {
		t.Fatalf("%d LIST requests in %v with a 2 s relist period, want at least 3: %v", lists, took, counter.Keys())
	}
	time.Sleep(2 * time.Second)
	convergedResource(t, ctx, h, rec, crd, ns)
	if got := len(plain.Informer().GetStore().ListKeys()); got != 4 {
		t.Fatalf("informer without relists holds %d objects, want 4", got)
	}
	mu.Lock()
	states := append([]dynamicinformer.State(nil), after...)
	mu.Unlock()
	if len(states) != 0 {
		t.Fatalf("states after the first sync: %v, want Synced throughout", states)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	t.Logf("%d lists in %v from the start; drift repaired %v after the start (adds %d, deletes %d)", lists, took, repaired.Sub(started).Round(100*time.Millisecond), adds, deletes)
	sc.Injected("WithRelistPeriod(2s) on 5 custom resources; the cache's copy of one object removed and an object the server never had added behind the informer's back; one object deleted on the server")
	sc.Held("drift repaired by a relist %v after the start: cache = server = handler (%d objects; the lost object re-added, the ghost deleted); %d LIST requests in the first %v (the initial sync streams), Synced throughout; an informer without the option listed once; no goroutine leak",
		repaired.Sub(started).Round(100*time.Millisecond), n, lists, took)
}
