package factorytest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

func toIfaces(objs []runtime.Object) []interface{} {
	out := make([]interface{}, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// TestTwoConsumersShareOneWatch: two ForResource calls and one ForName call
// naming the version give one informer and one watch request. ForName
// without a version gives a following informer (see ForName), shared among
// such calls only.
func TestTwoConsumersShareOneWatch(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("share")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 5, nil)
	cfg, counter := controlplane.CountRequests(cp.Config())
	f := newFactory(t, cfg)
	defer f.Shutdown()
	a := f.ForResource(gvr)
	b := f.ForResource(gvr)
	c, err := f.ForName(ctx, "widgets.v1."+gvr.Group)
	if err != nil {
		t.Fatal(err)
	}
	if a.Informer().GetIndexer() != b.Informer().GetIndexer() || a.Informer().GetIndexer() != c.Informer().GetIndexer() {
		t.Fatal("same resource and options gave different informers")
	}
	d, err := f.ForName(ctx, "widgets."+gvr.Group)
	if err != nil {
		t.Fatal(err)
	}
	e, err := f.ForName(ctx, "Widget."+gvr.Group)
	if err != nil {
		t.Fatal(err)
	}
	if d.Informer().GetIndexer() == a.Informer().GetIndexer() || d.Informer().GetIndexer() != e.Informer().GetIndexer() {
		t.Fatal("ForName without a version must give one following informer, distinct from the pinned one")
	}
	d.Release()
	e.Release()
	other := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	if other.Informer().GetIndexer() == a.Informer().GetIndexer() {
		t.Fatal("a namespace option must give a distinct informer")
	}
	other.Release()
	f.Start(ctx)
	if synced := f.WaitForCacheSync(ctx); !synced[gvr] {
		t.Fatalf("not synced: %v", synced)
	}
	createN(t, ctx, gvr, ns, 0, nil)
	time.Sleep(2 * time.Second) // let any extra request show up
	path := "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
	watches := counter.Count("watch", path)
	lists := counter.Count("list", path)
	if watches != 1 || lists > 1 {
		t.Fatalf("want one watch (and at most one list) for %s, got %d watches and %d lists: %v", path, watches, lists, counter.Keys())
	}
	got, err := a.Lister().ByNamespace(ns).List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("lister has %d objects, want 5", len(got))
	}
}

// TestNamespaceAndSelectorOptions: the cache holds exactly what the server
// returns for the same namespaces and selectors.
func TestNamespaceAndSelectorOptions(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvr, _ := installCRD(t, ctx)
	nsA, nsB, nsC := unique("nsa"), unique("nsb"), unique("nsc")
	for _, ns := range []string{nsA, nsB, nsC} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		createN(t, ctx, gvr, ns, 6, func(i int) map[string]string {
			return map[string]string{"tier": []string{"web", "db", "cache"}[i%3], "idx": fmt.Sprint(i)}
		})
	}
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	cases := []struct {
		name string
		opts []dynamicinformer.ResourceOption
		nss  []string
		lsel string
		fsel string
	}{
		{"one namespace", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nsA)}, []string{nsA}, "", ""},
		{"two namespaces", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nsA, nsB)}, []string{nsA, nsB}, "", ""},
		{"label selector", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nsA), dynamicinformer.WithLabelSelector("tier in (web,db)")}, []string{nsA}, "tier in (web,db)", ""},
		{"field selector", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nsC), dynamicinformer.WithFieldSelector("metadata.name=w-2")}, []string{nsC}, "", "metadata.name=w-2"},
		{"two namespaces and labels", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nsB, nsC), dynamicinformer.WithLabelSelector("tier=cache")}, []string{nsB, nsC}, "tier=cache", ""},
	}
	handles := make([]*dynamicinformer.InformerHandle, len(cases))
	for i, c := range cases {
		handles[i] = f.ForResource(gvr, c.opts...)
	}
	f.Start(ctx)
	f.WaitForCacheSync(ctx)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want []string
			for _, ns := range c.nss {
				want = append(want, serverKeys(t, ctx, gvr, ns, metav1.ListOptions{LabelSelector: c.lsel, FieldSelector: c.fsel})...)
			}
			sort.Strings(want)
			got := keysOf(handles[i].Informer().GetStore().List())
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("cache %v\nserver %v", got, want)
			}
		})
	}
	// An informer for all namespaces sees every object; the lister's label
	// selector (index) and namespace views agree with the server.
	all := f.ForResource(gvr)
	eventually(t, ctx, "all-namespaces informer sync", all.Informer().HasSynced)
	for _, sel := range []string{"tier=web", "tier!=web", "idx in (1,2)", "!idx", "tier"} {
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := all.Lister().ByNamespace(nsB).List(s)
		if err != nil {
			t.Fatal(err)
		}
		want := serverKeys(t, ctx, gvr, nsB, metav1.ListOptions{LabelSelector: sel})
		if got := keysOf(toIfaces(objs)); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("selector %q: lister %v, server %v", sel, got, want)
		}
	}
}

// TestReleaseStopsOnlyThatInformer: releasing the last handle stops the
// informer and its watch; another resource keeps running; a new
// ForResource builds a fresh informer.
func TestReleaseStopsOnlyThatInformer(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvrA, _ := installCRD(t, ctx)
	gvrB, _ := installCRD(t, ctx)
	ns := unique("rel")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg, counter := controlplane.CountRequests(cp.Config())
	f := newFactory(t, cfg)
	defer f.Shutdown()
	a1 := f.ForResource(gvrA)
	a2 := f.ForResource(gvrA)
	b := f.ForResource(gvrB)
	rec := newRecorder()
	if _, err := b.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	f.WaitForCacheSync(ctx)
	informerA := a1.Informer()
	a1.Release()
	a1.Release() // twice: no-op
	if informerA.IsStopped() {
		t.Fatal("informer stopped while a handle is still held")
	}
	a2.Release() // returns at once; the informer stops shortly after
	eventually(t, ctx, "informer stopped after its last handle was released", informerA.IsStopped)
	pathA := "/apis/" + gvrA.Group + "/"
	before := counter.Count("watch", pathA) + counter.Count("list", pathA)
	createN(t, ctx, gvrA, ns, 3, nil)
	createN(t, ctx, gvrB, ns, 3, nil)
	eventually(t, ctx, "the other informer's events", func() bool {
		objs, _, _, _ := rec.snapshot()
		return len(objs) == 3
	})
	time.Sleep(time.Second)
	if after := counter.Count("watch", pathA) + counter.Count("list", pathA); after != before {
		t.Fatalf("released informer kept talking to the server: %d -> %d requests", before, after)
	}
	for _, st := range f.Statuses() {
		if st.GVR == gvrA {
			t.Fatalf("released informer still listed in Statuses: %+v", st)
		}
	}
	fresh := f.ForResource(gvrA)
	defer fresh.Release()
	if fresh.Informer().GetIndexer() == informerA.GetIndexer() {
		t.Fatal("ForResource after release returned the stopped informer")
	}
	eventually(t, ctx, "fresh informer synced with 3 objects", func() bool {
		return fresh.Informer().HasSynced() && len(fresh.Informer().GetStore().ListKeys()) == 3
	})
}

// TestLateHandlerSeesExistingObjects: a handler added after sync receives
// every cached object as an add, and its registration reports HasSynced.
func TestLateHandlerSeesExistingObjects(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("late")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 7, nil)
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	inf := f.ForResource(gvr)
	f.Start(ctx)
	f.WaitForCacheSync(ctx)
	rec := newRecorder()
	reg, err := inf.Informer().AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "late handler synced", reg.HasSynced)
	objs, adds, _, _ := rec.snapshot()
	if adds != 7 || len(objs) != 7 {
		t.Fatalf("late handler got %d adds (%d objects), want 7", adds, len(objs))
	}
}

// TestSideBySideWithClientGo: for the same server state our lister and
// client-go's dynamicinformer return identical object sets.
func TestSideBySideWithClientGo(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("side")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 20, func(i int) map[string]string { return map[string]string{"even": fmt.Sprint(i%2 == 0)} })
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ours := newFactory(t, cp.Config())
	defer ours.Shutdown()
	theirs := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	stop := make(chan struct{})
	defer theirs.Shutdown()
	defer close(stop)
	for _, r := range []schema.GroupVersionResource{gvr, cms} {
		ours.ForResource(r)
		theirs.ForResource(r)
	}
	ours.Start(ctx)
	theirs.Start(stop)
	ours.WaitForCacheSync(ctx)
	theirs.WaitForCacheSync(stop)
	// Other tests write configmaps meanwhile: the two caches hold the
	// same server state once both have its latest events, so each pair of
	// lists is compared until it agrees (or the deadline).
	for _, r := range []schema.GroupVersionResource{gvr, cms} {
		for _, sel := range []string{"", "even=true"} {
			s, _ := labels.Parse(sel)
			var ka, kb []string
			eventually(t, ctx, fmt.Sprintf("%s %q: the same objects in both caches", r, sel), func() bool {
				a, err := ours.ForResource(r).Lister().List(s)
				if err != nil {
					t.Fatal(err)
				}
				b, err := theirs.ForResource(r).Lister().List(s)
				if err != nil {
					t.Fatal(err)
				}
				ka, kb = keysOf(toIfaces(a)), keysOf(toIfaces(b))
				if !reflect.DeepEqual(ka, kb) {
					t.Logf("%s %q: informerkit %d objects, client-go %d", r, sel, len(ka), len(kb))
					return false
				}
				return true
			})
			if r == gvr && len(ka) == 0 {
				t.Fatalf("%s %q: no objects at all", r, sel)
			}
		}
	}
}

// TestShutdownLeavesNoGoroutines runs a factory with several informers,
// including a pending one, and checks that Shutdown ends every goroutine.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	gvr, _ := installCRD(t, ctx)
	opts := controlplane.SnapshotGoroutines()
	f := newFactory(t, cp.Config())
	f.ForResource(gvr)
	f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, dynamicinformer.WithNamespaces("default", "kube-system"))
	f.ForResource(schema.GroupVersionResource{Group: "not.installed.example.com", Version: "v1", Resource: "things"})
	f.OnStatusChange(func(dynamicinformer.Status) {})
	f.Start(ctx)
	f.WaitForCacheSync(ctxT(t, 10*time.Second))
	f.Shutdown()
	opts.VerifyNoLeaks(t)
	for _, st := range f.Statuses() {
		t.Fatalf("status after shutdown still listed: %+v", st)
	}
	_ = strings.TrimSpace
}
