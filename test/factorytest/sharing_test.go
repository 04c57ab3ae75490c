package factorytest

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// sharingSetup creates a namespace with n ConfigMaps and a factory whose
// requests are counted; requests counts the lists and watches of that
// namespace's ConfigMaps.
func sharingSetup(t *testing.T, ctx context.Context, prefix string, n int) (f *dynamicinformer.Factory, inNS dynamicinformer.ResourceOption, requests func() (lists, watches int)) {
	t.Helper()
	ns := unique(prefix)
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, ctx, n, func(i int) *corev1.ConfigMap { return decodingConfigMap(ns, i) })
	cfg, counter := controlplane.CountRequests(cp.Config())
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	requests = func() (int, int) { return counter.Count("list", path), counter.Count("watch", path) }
	return newFactory(t, cfg), dynamicinformer.WithNamespaces(ns), requests
}

// TestShareEqualProjections: two handles asking for equal projections —
// the same value built separately, one through a closure, with fields in
// another order — share one informer: one list and one watch reach the
// server; a different projection makes a second informer.
func TestShareEqualProjections(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	f, inNS, requests := sharingSetup(t, ctx, "share", 3)
	leaks := controlplane.SnapshotGoroutines()
	// The option is built inside a closure: what it asks for is data, so
	// where it was built does not matter.
	stripped := func() dynamicinformer.ResourceOption {
		return dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, Fields: "data,metadata.name"})
	}
	h1 := f.ForResource(configmaps, inNS, stripped())
	h2 := f.ForResource(configmaps, inNS, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, Fields: "metadata.name, data"}))
	if h1.Informer().GetIndexer() != h2.Informer().GetIndexer() {
		t.Fatal("equal projections got two informers")
	}
	f.Start(ctx)
	eventually(t, ctx, "sync", func() bool { return h1.Informer().HasSynced() && h2.Informer().HasSynced() })
	time.Sleep(500 * time.Millisecond) // a second list or watch would be on its way
	if lists, watches := requests(); lists+watches == 0 || lists+watches > 2 || watches > 1 || lists > 1 {
		t.Fatalf("%d lists and %d watches for one shared informer, want one list and one watch (or one watch-list); none means the counter sees nothing", lists, watches)
	}
	if got := len(h1.Informer().GetStore().List()); got != 3 {
		t.Fatalf("cache holds %d objects", got)
	}
	other := f.ForResource(configmaps, inNS, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}))
	eventually(t, ctx, "second informer sync", other.Informer().HasSynced)
	if other.Informer().GetIndexer() == h1.Informer().GetIndexer() {
		t.Fatal("different projections shared one informer")
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestSharedRelistPeriod: a second handle asking a running shared
// informer (no relist) for a relist every 300 ms gets it against the real
// server: list (or watch-list) requests keep coming, the state stays Synced; a third
// handle whose resync period the informer cannot honour is Failed with
// ErrOptionConflict and the shared informer goes on.
func TestSharedRelistPeriod(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	f, inNS, requests := sharingSetup(t, ctx, "relist", 2)
	leaks := controlplane.SnapshotGoroutines()
	h1 := f.ForResource(configmaps, inNS)
	f.Start(ctx)
	eventually(t, ctx, "sync", h1.Informer().HasSynced)
	time.Sleep(time.Second)
	lists, watches := requests()
	before := lists + watches
	h2 := f.ForResource(configmaps, inNS, dynamicinformer.WithRelistPeriod(300*time.Millisecond))
	if h2.Informer().GetIndexer() != h1.Informer().GetIndexer() || h2.Status().Err != nil {
		t.Fatalf("second handle: %+v", h2.Status())
	}
	eventually(t, ctx, "relists", func() bool { lists, watches := requests(); return lists+watches >= before+4 })
	if st := h1.Status(); st.State != dynamicinformer.Synced || st.Objects != 2 {
		t.Fatalf("status %+v", st)
	}
	bad := f.ForResource(configmaps, inNS, dynamicinformer.WithResyncPeriod(time.Minute))
	if st := bad.Status(); st.State != dynamicinformer.Failed || !errors.Is(st.Err, dynamicinformer.ErrOptionConflict) {
		t.Fatalf("conflicting handle: %+v", st)
	}
	if st := h1.Status(); st.State != dynamicinformer.Synced {
		t.Fatalf("shared informer after the conflict: %+v", st)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}
