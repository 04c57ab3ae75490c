package dynamicinformer

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

var widgetsV2 = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}

// lcClient is a fake dynamic client that knows widgets (v1, v2),
// clusterwidgets and CRDs.
func lcClient(objs ...kruntime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		widgets:              "WidgetList",
		widgetsV2:            "WidgetList",
		presence.CRDResource: "CustomResourceDefinitionList",
		{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}: "ClusterWidgetList",
	}, objs...)
}

// widgetsCRD is the CRD of widgets serving the given versions.
func widgetsCRD(served ...string) *unstructured.Unstructured {
	var vs []interface{}
	for _, v := range []string{"v1", "v2"} {
		vs = append(vs, map[string]interface{}{"name": v, "served": slices.Contains(served, v), "storage": v == "v1"})
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]interface{}{"name": "widgets.example.com"},
		"spec":     map[string]interface{}{"group": "example.com", "names": map[string]interface{}{"plural": "widgets"}, "versions": vs},
		"status": map[string]interface{}{"conditions": []interface{}{
			map[string]interface{}{"type": "Established", "status": "True"},
		}},
	}}
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watchingCRDs waits until the factory's CRD informer watches (the fake
// client drops events between a list and its watch).
func watchingCRDs(t *testing.T, c *dynamicfake.FakeDynamicClient) {
	t.Helper()
	waitUntil(t, "the CRD watch", 10*time.Second, func() bool {
		return countActions(c, "watch", presence.CRDResource, "") > 0
	})
}

func countActions(c *dynamicfake.FakeDynamicClient, verb string, gvr schema.GroupVersionResource, ns string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource() == gvr && (ns == "" || a.GetNamespace() == ns) {
			n++
		}
	}
	return n
}

// lockedDiscovery is client-go's fake discovery with resources the test
// may change while the factory reads them.
type lockedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu sync.Mutex // guards FakeDiscovery.Resources
}

func newLockedDiscovery(lists ...*metav1.APIResourceList) *lockedDiscovery {
	return &lockedDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}}
}

func (d *lockedDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsAndResourcesWithContext(ctx)
}

func (d *lockedDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return d.ServerGroupsAndResourcesWithContext(context.Background())
}

func (d *lockedDiscovery) ServerResourcesForGroupVersionWithContext(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
}

func (d *lockedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return d.ServerResourcesForGroupVersionWithContext(context.Background(), gv)
}

func widgetResources(resources ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: "example.com/v1"}
	for _, r := range resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Kind: "Widget", Namespaced: r != "clusterwidgets",
			Verbs: metav1.Verbs{"get", "list", "watch"}})
	}
	return l
}

// A CRD removed and re-installed while the informer runs: its handlers
// get a delete per object, the status says Removed with an empty cache,
// and the same informer comes back with the objects when the CRD serves
// the version again.
func TestCRDRemovalAndReturn(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient(widgetsCRD("v1"), widget("a", "w1", nil), widget("a", "w2", nil))
	f := NewSharedInformerFactory(c, Options{})
	h := f.ForResource(widgets)
	var mu sync.Mutex
	var events []string
	_, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			mu.Lock()
			events = append(events, "add:"+o.(metav1.Object).GetName())
			mu.Unlock()
		},
		DeleteFunc: func(o interface{}) {
			mu.Lock()
			events = append(events, "delete:"+o.(metav1.Object).GetName())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] || !h.Informer().HasSynced() {
		t.Fatal("not synced")
	}
	if st := h.Status(); st.State != Synced || st.Objects != 2 {
		t.Fatalf("status %+v", st)
	}
	watchingCRDs(t, c)

	if _, err := c.Resource(presence.CRDResource).Update(ctx, widgetsCRD(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "Removed", 10*time.Second, func() bool { return h.Status().State == Removed })
	st := h.Status()
	if st.Objects != 0 || !errors.Is(st.Err, ErrNotServed) || !strings.Contains(st.Reason, "widgets.example.com") {
		t.Fatalf("removed status %+v", st)
	}
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, []string{"add:w1", "add:w2", "delete:w1", "delete:w2"}) {
		t.Fatalf("events %v", got)
	}
	if !h.Informer().HasSynced() {
		t.Fatal("HasSynced went false on removal")
	}

	if _, err := c.Resource(presence.CRDResource).Update(ctx, widgetsCRD("v1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the objects back", 10*time.Second, func() bool { return h.Status().Objects == 2 })
	waitUntil(t, "Synced again", 10*time.Second, func() bool { return h.Status().State == Synced })
	f.Shutdown()
	if st := h.Status(); st.State != Stopped {
		t.Fatalf("after Shutdown: %+v", st)
	}
	noLeaks(t)
}

// Issue 20, defect 6: a factory with CRD tracking but no discovery, for a
// resource no CRD serves yet, was not quiet: 1 watch and 6 lists in 20 s
// (404 re-checks at 250 ms, 500 ms, ...). Now it lists once, meets the
// 404, and waits Pending for the CRD (re-check at the cap, a minute).
// When the CRD comes, it syncs at once.
func TestNotServedWithoutDiscoveryIsQuiet(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient(widget("a", "w1", nil))
	var served atomic.Bool
	c.PrependReactor("*", "widgets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		if served.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(widgets.GroupResource(), "")
	})
	f := NewSharedInformerFactory(c, Options{WatchIdleTimeout: time.Minute})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	watchingCRDs(t, c)
	time.Sleep(3 * time.Second)
	if lists, watches := countActions(c, "list", widgets, ""), countActions(c, "watch", widgets, ""); lists > 1 || watches > 0 {
		t.Fatalf("%d lists and %d watches in 3s of a resource no CRD serves, want 1 list", lists, watches)
	}
	st := h.Status()
	if st.State != Pending || !errors.Is(st.Err, ErrNotServed) {
		t.Fatalf("status %+v", st)
	}
	served.Store(true)
	if _, err := c.Resource(presence.CRDResource).Create(ctx, widgetsCRD("v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "Synced once the CRD exists", 3*time.Second, func() bool { return h.Status().State == Synced })
	f.Shutdown()
	noLeaks(t)
}

// Issue 20, defect 8: with the CRD list forbidden and no discovery, every
// informer's first sync waited the 5 s readiness timeout. A forbidden CRD
// list is an answer: the first sync is quick.
func TestForbiddenCRDListDoesNotDelayFirstSync(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient(widget("a", "w1", nil))
	c.PrependReactor("list", "customresourcedefinitions", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(presence.CRDResource.GroupResource(), "", errors.New("RBAC"))
	})
	f := NewSharedInformerFactory(c, Options{})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Fatalf("first sync took %v with a forbidden CRD list (the readiness timeout is 5s)", took)
	}
	if st := h.Status(); st.State != Synced || st.Objects != 1 {
		t.Fatalf("status %+v", st)
	}
	f.Shutdown()
	noLeaks(t)
}

// A namespace asked of a cluster-scoped resource is a configuration
// error: ForName says so, ForResource's status is Failed with it.
func TestNamespaceOnClusterScoped(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(widgetResources("widgets", "clusterwidgets"))
	c := lcClient()
	f := NewSharedInformerFactory(c, Options{Resolver: discoveryresolver.New(d), DisableCRDTracking: true, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cw := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}
	if _, err := f.ForName(ctx, "clusterwidgets", WithNamespaces("a")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ForName: %v", err)
	}
	if _, err := f.ForName(ctx, "widgets", WithLabelSelector("a in (")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ForName bad selector: %v", err)
	}
	if _, err := f.ForName(ctx, "nosuchthing"); !errors.Is(err, discoveryresolver.ErrNotFound) {
		t.Fatalf("ForName unknown: %v", err)
	}
	h := f.ForResource(cw, WithNamespaces("a"))
	f.Start(ctx)
	waitUntil(t, "Failed", 10*time.Second, func() bool { return h.Status().State == Failed })
	if st := h.Status(); !errors.Is(st.Err, ErrInvalid) {
		t.Fatalf("status %+v", st)
	}
	if n := countActions(c, "list", cw, ""); n != 0 {
		t.Fatalf("%d lists sent for a misconfigured informer", n)
	}
	byName, err := f.ForName(ctx, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "widgets synced", 10*time.Second, byName.Informer().HasSynced)
	if byName.GVR() != widgets {
		t.Fatalf("gvr %v", byName.GVR())
	}
	f.Shutdown()
	noLeaks(t)
}

// Issue 20, defect 14, through the factory: one namespace of two is
// forbidden; the allowed one syncs and is cached; the status names the
// refused namespace.
func TestSeveralNamespacesOneForbidden(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient(widget("a", "w1", nil), widget("a", "w2", nil), widget("b", "w3", nil))
	c.PrependReactor("list", "widgets", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		if a.GetNamespace() == "b" {
			return true, nil, apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("namespace b refused"))
		}
		return false, nil, nil
	})
	f := NewSharedInformerFactory(c, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets, WithNamespaces("a", "b"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatalf("not synced: %+v", h.Status())
	}
	st := h.Status()
	if st.State != Synced || st.Objects != 2 || !errors.Is(st.Err, ErrForbidden) || !strings.Contains(st.Err.Error(), "[b]") {
		t.Fatalf("status %+v", st)
	}
	// The namespace's reason is said once (it was wrapped twice: the
	// message named it and the wrapped error said it again).
	if n := strings.Count(st.Err.Error(), "namespace b refused"); n != 1 || !apierrors.IsForbidden(st.Err) {
		t.Fatalf("status error %q says the reason %d times, want once (and wraps the 403)", st.Err, n)
	}
	f.Shutdown()
	noLeaks(t)
}

// A following informer (ForName without a version) moves to v2 when the
// CRD serves it beside v1: its GVR says so and it syncs at v2.
func TestForNameFollowsCRDVersions(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(widgetResources("widgets"))
	// The objects as v2 serves them (the fake client stores versions
	// apart, each with its own resourceVersion counter: v2's must be ahead
	// of v1's, as a real server's would be after the switch).
	w1v2, w2v2 := widget("a", "w1", nil), widget("a", "w2", nil)
	w1v2.SetAPIVersion("example.com/v2")
	w2v2.SetAPIVersion("example.com/v2")
	c := lcClient(widgetsCRD("v1"), widget("a", "w1", nil), w1v2, w2v2)
	f := NewSharedInformerFactory(c, Options{Resolver: discoveryresolver.New(d)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	h, err := f.ForName(ctx, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := f.ForName(ctx, "widgets.v1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if h.Informer().GetIndexer() == pinned.Informer().GetIndexer() {
		t.Fatal("a following and a pinned informer share")
	}
	waitUntil(t, "synced at v1", 10*time.Second, func() bool { return h.Status().State == Synced })
	watchingCRDs(t, c)
	if _, err := c.Resource(presence.CRDResource).Update(ctx, widgetsCRD("v1", "v2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "moved to v2", 10*time.Second, func() bool { return h.GVR() == widgetsV2 })
	waitUntil(t, "synced at v2", 10*time.Second, func() bool { st := h.Status(); return st.State == Synced && st.GVR == widgetsV2 })
	// Synced after a version switch is published once the relist's
	// Replace is applied (the store's resourceVersion reached the
	// relist's), so the cache holds v2's objects, and only them, at once.
	objs := h.Informer().GetStore().List()
	for _, o := range objs {
		if v := o.(*unstructured.Unstructured).GetAPIVersion(); v != "example.com/v2" {
			t.Errorf("Synced at v2, the cache holds %s of %s", o.(*unstructured.Unstructured).GetName(), v)
		}
	}
	if len(objs) != 2 {
		t.Errorf("Synced at v2, the cache holds %d objects, want 2", len(objs))
	}
	if pinned.GVR() != widgets {
		t.Fatalf("the pinned informer moved to %v", pinned.GVR())
	}
	f.Shutdown()
	noLeaks(t)
}

// Lost contact shows in ContactErr and clears when the server answers.
func TestContactLostAndRestored(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient(widget("a", "w1", nil))
	var down atomic.Bool
	down.Store(true)
	refused := &url.Error{Op: "Get", URL: "https://server", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	c.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		if down.Load() {
			return true, nil, refused
		}
		return false, nil, nil
	})
	// The factory's probe meets the same server.
	c.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, kruntime.Object, error) {
		if down.Load() {
			return true, nil, refused
		}
		return true, nil, nil
	})
	f := NewSharedInformerFactory(c, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitUntil(t, "lost contact", 10*time.Second, func() bool { return h.Status().ContactErr != nil })
	st := h.Status()
	if !errors.Is(st.ContactErr, ErrNoContact) || !errors.Is(st.ContactErr, syscall.ECONNREFUSED) || !st.LastContact.IsZero() {
		t.Fatalf("status %+v", st)
	}
	// Never synced: Syncing, its reason says no contact (no URL).
	if st.State != Syncing || st.Reason != "listing; no contact with the API server: connection refused" {
		t.Fatalf("before the first list: state %s, reason %q", st.State, st.Reason)
	}
	down.Store(false)
	waitUntil(t, "synced", 10*time.Second, func() bool { return h.Status().State == Synced })
	if st := h.Status(); st.ContactErr != nil || st.LastContact.IsZero() {
		t.Fatalf("after reconnect: %+v", st)
	}
	f.Shutdown()
	noLeaks(t)
}

// NewForConfig builds its clients without contacting the server.
func TestNewForConfig(t *testing.T) {
	f, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Resolver() == nil {
		t.Fatal("no resolver")
	}
	f.Shutdown()
	if _, err := NewForConfig(&rest.Config{Host: "://bad"}, Options{}); err == nil {
		t.Fatal("a bad host gave no error")
	}
}

// The deletes a removal hands the reflector are copies of the type it
// expects, whatever the cache holds.
func TestAsWatchedAndBookmark(t *testing.T) {
	u := widget("a", "w1", map[string]string{"k": "v"})
	u.SetUID("uid-1")
	if o := asWatched(false)(u); o == u || o.(*unstructured.Unstructured).GetName() != "w1" {
		t.Fatalf("unstructured: %v", o)
	}
	pm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", UID: "uid-2"}}
	if o := asWatched(true)(pm); o == pm || o.(*metav1.PartialObjectMetadata).Name != "p" {
		t.Fatalf("metadata: %v", o)
	}
	// Another type: reduced to its metadata, of the expected type.
	if o, ok := asWatched(true)(u).(*metav1.PartialObjectMetadata); !ok || o.Name != "w1" || o.UID != "uid-1" || o.Labels["k"] != "v" {
		t.Fatalf("unstructured as metadata: %v", o)
	}
	if o, ok := asWatched(false)(pm).(*unstructured.Unstructured); !ok || o.GetName() != "p" || o.GetUID() != "uid-2" {
		t.Fatalf("metadata as unstructured: %v", o)
	}
	if o := asWatched(false)(decoder{u}); o.(*unstructured.Unstructured).GetName() != "w1" {
		t.Fatalf("decoded: %v", o)
	}
	if o := asWatched(false)("not an object"); o != nil {
		t.Fatalf("non-object: %v", o)
	}
	if b := bookmarkObject(true)("7").(*metav1.PartialObjectMetadata); b.ResourceVersion != "7" {
		t.Fatalf("bookmark %v", b)
	}
	if b := bookmarkObject(false)("8").(*unstructured.Unstructured); b.GetResourceVersion() != "8" {
		t.Fatalf("bookmark %v", b)
	}
}

// decoder is a compacted cached object (cache.Compact's shape).
type decoder struct{ u *unstructured.Unstructured }

func (d decoder) Decode() (*unstructured.Unstructured, error) { return d.u.DeepCopy(), nil }
func (d decoder) GetObjectKind() schema.ObjectKind            { return schema.EmptyObjectKind }
func (d decoder) DeepCopyObject() kruntime.Object             { return d }
