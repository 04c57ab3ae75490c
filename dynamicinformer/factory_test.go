package dynamicinformer

import (
	"context"
	"errors"
	"github.com/informerkit/informerkit/genericlister"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/labelindex"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widget(ns, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
	}}
	u.SetLabels(lbls)
	return u
}

func fakeClient(objs ...kruntime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		widgets:                                 "WidgetList",
		presence.CRDResource:                    "CustomResourceDefinitionList",
		{Version: "v1", Resource: "configmaps"}: "ConfigMapList",
	}, objs...)
}

// goroutinesIn counts goroutines with a frame in this package.
func goroutinesIn() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	c := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "informerkit/dynamicinformer.") && !strings.Contains(g, "goroutinesIn") && !strings.Contains(g, "testing.tRunner") {
			c++
		}
	}
	return c
}

func checkNoLeaks(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := runtime.NumGoroutine()
		if after <= before && goroutinesIn() == 0 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d before, %d after shutdown\n%s", before, after, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSharingIdentity(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	tweakA := func(o *metav1.ListOptions) { o.Limit = 1 }
	tweakB := func(o *metav1.ListOptions) { o.Limit = 2 }
	identity := func(o interface{}) (interface{}, error) { return o, nil }
	base := f.ForResource(widgets)
	cases := []struct {
		name   string
		opts   []ResourceOption
		shared bool
	}{
		{"no options", nil, true},
		{"explicit all namespaces", []ResourceOption{WithNamespaces("")}, true},
		{"indexers do not split", []ResourceOption{WithIndexers(toolscache.Indexers{"x": toolscache.MetaNamespaceIndexFunc})}, true},
		{"resync does not split", []ResourceOption{WithResyncPeriod(0)}, true},
		{"relist does not split", []ResourceOption{WithRelistPeriod(time.Hour)}, true},
		{"access check does not split", []ResourceOption{WithAccessCheck(true)}, true},
		{"full-object projection", []ResourceOption{WithProjection(Projection{})}, true},
		{"namespace", []ResourceOption{WithNamespaces("a")}, false},
		{"label selector", []ResourceOption{WithLabelSelector("a=b")}, false},
		{"field selector", []ResourceOption{WithFieldSelector("metadata.name=x")}, false},
		{"projection", []ResourceOption{WithProjection(Projection{StripManagedFields: true})}, false},
		{"tweak", []ResourceOption{WithTweakListOptions("a", tweakA)}, false},
		{"unkeyed tweak", []ResourceOption{WithTweakListOptions("", tweakA)}, false},
		{"transform", []ResourceOption{WithTransform("id", identity)}, false},
		{"unkeyed transform", []ResourceOption{WithTransform("", identity)}, false},
		{"sharing key", []ResourceOption{WithSharingKey("mine")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := f.ForResource(widgets, c.opts...)
			defer h.Release()
			if st := h.Status(); st.Err != nil {
				t.Fatal(st.Err)
			}
			if got := h.Informer().GetIndexer() == base.Informer().GetIndexer(); got != c.shared {
				t.Fatalf("shared=%v, want %v", got, c.shared)
			}
		})
	}
	// Keyed code shares by key: the first handle's func runs.
	a1 := f.ForResource(widgets, WithTweakListOptions("a", tweakA))
	a2 := f.ForResource(widgets, WithTweakListOptions("a", tweakB))
	b1 := f.ForResource(widgets, WithTweakListOptions("b", tweakB))
	if a1.Informer().GetIndexer() != a2.Informer().GetIndexer() || a1.Informer().GetIndexer() == b1.Informer().GetIndexer() {
		t.Fatal("tweaks: equal keys must share, different ones must not")
	}
	if a1.e.cfg.tweak.key != "a" {
		t.Fatal("the informer does not run the first handle's tweak")
	}
	u1 := f.ForResource(widgets, WithTransform("", identity))
	u2 := f.ForResource(widgets, WithTransform("", identity))
	if u1.Informer().GetIndexer() == u2.Informer().GetIndexer() {
		t.Fatal("unkeyed transforms shared an informer")
	}
	// Projections share by value, whatever built them.
	p1 := f.ForResource(widgets, WithProjection(Projection{StripManagedFields: true, Fields: "spec.b,spec.a"}))
	p2 := f.ForResource(widgets, func(c *resourceConfig) {
		WithProjection(Projection{StripManagedFields: true, Fields: "spec.a, spec.b, spec.a"})(c)
	})
	p3 := f.ForResource(widgets, WithProjection(Projection{StripManagedFields: true, Fields: "spec.a"}))
	if p1.Informer().GetIndexer() != p2.Informer().GetIndexer() || p1.Informer().GetIndexer() == p3.Informer().GetIndexer() {
		t.Fatal("projections: equal ones must share, different ones must not")
	}
	// Indexers asked for later are added to the shared informer.
	withIdx := f.ForResource(widgets, WithIndexers(toolscache.Indexers{"byName": func(o interface{}) ([]string, error) {
		return []string{o.(metav1.Object).GetName()}, nil
	}}))
	if _, ok := withIdx.Informer().GetIndexer().GetIndexers()["byName"]; !ok {
		t.Fatal("indexer not added to the shared informer")
	}
}

func TestOptionPrecedence(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{Defaults: []ResourceOption{WithNamespaces("team-a"), WithLabelSelector("app=x")}, DisableCRDTracking: true})
	defer f.Shutdown()
	st := f.ForResource(widgets).Status()
	if len(st.Namespaces) != 1 || st.Namespaces[0] != "team-a" || st.LabelSelector != "app=x" {
		t.Fatalf("factory defaults not applied: %+v", st)
	}
	st = f.ForResource(widgets, WithNamespaces(), WithLabelSelector("")).Status()
	if len(st.Namespaces) != 0 || st.LabelSelector != "" {
		t.Fatalf("per-resource override not applied: %+v", st)
	}
	st = f.ForResource(widgets, WithNamespaces("b", "a", "b")).Status()
	if strings.Join(st.Namespaces, ",") != "a,b" {
		t.Fatalf("namespaces not normalized: %v", st.Namespaces)
	}
}

func TestInvalidSelectorIsAStatusNotAPanic(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	h := f.ForResource(widgets, WithLabelSelector("a in ("))
	st := h.Status()
	if st.State != Failed || !errors.Is(st.Err, ErrInvalid) {
		t.Fatalf("status %+v", st)
	}
	h.Release()
	h.Release()
}

func TestReferenceCountingAndLifecycle(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(widget("a", "w1", map[string]string{"tier": "web"}), widget("a", "w2", nil), widget("b", "w3", map[string]string{"tier": "web"}))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h1 := f.ForResource(widgets)
	h2 := f.ForResource(widgets)
	f.Start(ctx)
	f.Start(ctx) // twice: no-op
	if synced := f.WaitForCacheSync(ctx); !synced[widgets] {
		t.Fatalf("not synced: %v", synced)
	}
	waitFor(t, func() bool { return h1.Status().State == Synced })
	objs, err := h1.Lister().List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
	if err != nil || len(objs) != 2 {
		t.Fatalf("label list: %d objects, %v", len(objs), err)
	}
	if _, err := h1.Lister().ByNamespace("a").Get("w2"); err != nil {
		t.Fatal(err)
	}
	// A handle created after Start starts by itself.
	late := f.ForResource(widgets, WithNamespaces("b"))
	waitFor(t, late.Informer().HasSynced)
	if n := len(late.Informer().GetStore().ListKeys()); n != 1 {
		t.Fatalf("namespace b informer holds %d objects", n)
	}
	late.Release() // returns at once; the informer stops shortly after
	waitFor(t, late.Informer().IsStopped)
	waitFor(t, func() bool { return late.Status().State == Stopped && late.Status().Reason == "released" })
	h1.Release()
	if h2.Informer().IsStopped() {
		t.Fatal("informer stopped while a handle remains")
	}
	h2.Release()
	waitFor(t, h2.Informer().IsStopped)
	if len(f.Statuses()) != 0 {
		t.Fatalf("statuses after release: %v", f.Statuses())
	}
	h3 := f.ForResource(widgets)
	if h3.Informer().GetIndexer() == h1.Informer().GetIndexer() {
		t.Fatal("stopped informer handed out again")
	}
	waitFor(t, h3.Informer().HasSynced)
	f.Shutdown()
	f.Shutdown() // twice: no-op
	if !h3.Informer().IsStopped() {
		t.Fatal("Shutdown left an informer running")
	}
	if st := f.ForResource(widgets).Status(); st.State != Stopped || !errors.Is(st.Err, ErrStopped) {
		t.Fatalf("ForResource after Shutdown: %+v", st)
	}
	checkNoLeaks(t, before)
}

func TestStatusNotifications(t *testing.T) {
	client := fakeClient(widget("a", "w1", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	got := make(chan Status, 100)
	remove := f.OnStatusChange(func(s Status) { got <- s })
	defer remove()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.ForResource(widgets)
	f.Start(ctx)
	seen := map[State]bool{}
	timeout := time.After(20 * time.Second)
	for !seen[Synced] {
		select {
		case s := <-got:
			seen[s.State] = true
			if s.State == Synced && s.Objects != 1 {
				t.Fatalf("synced status reports %d objects", s.Objects)
			}
		case <-timeout:
			t.Fatalf("no Synced notification; saw %v", seen)
		}
	}
	if !seen[Syncing] {
		t.Fatalf("Synced without Syncing first: %v", seen)
	}
	f.Shutdown()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestVersionPinned(t *testing.T) {
	apps := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	ct := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	for _, c := range []struct {
		ref    string
		gvr    schema.GroupVersionResource
		pinned bool
	}{
		{"deployments.v1.apps", apps, true},
		{"Deployment.v1.apps", apps, true},
		{"deployments.apps", apps, false},
		{"deploy", apps, false},
		{"pods.v1", pods, true},
		{"pods", pods, false},
		{"crontabs.v1.stable.example.com", ct, true},
		{"crontabs.stable.example.com", ct, false},
		{"ct", ct, false},
		{"crontabs.v1.other.example.com", ct, false},
	} {
		if got := versionPinned(c.ref, c.gvr); got != c.pinned {
			t.Errorf("versionPinned(%q, %v) = %v, want %v", c.ref, c.gvr, got, c.pinned)
		}
	}
}

// TestLabelIndexOptions: by default a selector List through the handle's
// Lister adds the per-key index of the selected key and answers from it;
// LabelIndexKeys adds indexes up front (also to an informer already shared
// and running).
func TestLabelIndexOptions(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(widget("a", "w1", map[string]string{"tier": "web", "app": "x"}), widget("a", "w2", nil), widget("b", "w3", map[string]string{"tier": "web"}))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	def := f.ForResource(widgets)
	off := f.ForResource(widgets, WithNamespaces("a"))
	f.Start(ctx)
	waitFor(t, def.Informer().HasSynced)
	waitFor(t, off.Informer().HasSynced)

	tierIndex := labelindex.LabelKeyIndexName("tier")
	if ikcache.HasIndex(def.Informer().GetIndexer(), tierIndex) {
		t.Fatal("per-key index present before any selector List")
	}
	for _, h := range []*InformerHandle{def, off} {
		objs, err := genericlister.New(h.Informer().GetIndexer(), h.GVR().GroupResource()).List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if h == off {
			want = 1 // namespace a only
		}
		if len(objs) != want {
			t.Fatalf("tier=web: %d objects, want %d", len(objs), want)
		}
	}
	if !ikcache.HasIndex(def.Informer().GetIndexer(), tierIndex) {
		t.Fatal("the default informer's selector List added no per-key index")
	}
	if keys, _ := def.Informer().GetIndexer().IndexKeys(tierIndex, "web"); len(keys) != 2 {
		t.Fatalf("tier index holds %v, want 2 keys", keys)
	}
	if !ikcache.HasIndex(off.Informer().GetIndexer(), tierIndex) {
		t.Fatal("the namespace-a informer's selector List added no per-key index")
	}

	// Asking the shared, running default informer for more keys adds them.
	again := f.ForResource(widgets, WithLabelIndexKeys("app", "tier"))
	if again.Informer().GetIndexer() != def.Informer().GetIndexer() {
		t.Fatal("LabelIndexKeys split the informer")
	}
	if keys, err := again.Informer().GetIndexer().IndexKeys(labelindex.LabelKeyIndexName("app"), "x"); err != nil || len(keys) != 1 {
		t.Fatalf("app index: %v, %v", keys, err)
	}
	f.Shutdown()
	checkNoLeaks(t, before)
}

// TestRepeatedFailurePublishedOnce: a list that keeps failing the same way
// is retried at the reflector's backoff, but the Failed status is
// published once (not once per retry), and recovery publishes Synced.
func TestRepeatedFailurePublishedOnce(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(widget("a", "w1", nil))
	var lists atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	client.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		lists.Add(1)
		if failing.Load() {
			return true, nil, apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("no access"))
		}
		return false, nil, nil
	})
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	var failed, synced atomic.Int32
	f.OnStatusChange(func(s Status) {
		switch s.State {
		case Failed:
			failed.Add(1)
		case Synced:
			synced.Add(1)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	waitFor(t, func() bool { return lists.Load() >= 3 })
	if st := h.Status(); st.State != Failed || !errors.Is(st.Err, ErrForbidden) {
		t.Fatalf("status %+v, want Failed with ErrForbidden", st)
	}
	if n := failed.Load(); n != 1 {
		t.Fatalf("Failed published %d times over %d failing lists, want once", n, lists.Load())
	}
	failing.Store(false)
	waitFor(t, func() bool { return h.Status().State == Synced })
	waitFor(t, func() bool { return synced.Load() == 1 })
	f.Shutdown()
	checkNoLeaks(t, before)
}

// When an informer's Synced status is published (OnStatusChange), its
// handles' HasSynced are already true: a waiter woken by the status must
// not find HasSynced false and wait for a change that never comes. The
// synced channel used to be closed after the status was published, and
// controllerruntime's GetInformer timed out with the informer Synced.
// Checked at the moment of publication (the informer's publish hook), so
// the order is tested, not the notifier goroutine's timing.
func TestSyncedStatusAfterHasSynced(t *testing.T) {
	client := fakeClient(widget("a", "w1", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	var mu sync.Mutex
	published, before := 0, 0
	publish := h.e.deps.publish
	h.e.deps.publish = func(s Status) {
		if s.State == Synced {
			mu.Lock()
			published++
			if !h.Informer().HasSynced() {
				before++
			}
			mu.Unlock()
		}
		publish(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitUntil(t, "Synced published", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return published > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if before != 0 {
		t.Fatalf("the Synced status was published while HasSynced was false (%d of %d)", before, published)
	}
	f.Shutdown()
}
