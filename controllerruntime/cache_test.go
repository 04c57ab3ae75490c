package controllerruntime

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/go-logr/logr/funcr"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

func TestOptionsFold(t *testing.T) {
	d := time.Minute
	yes := true
	defaults, _, err := newPlans(cache.Options{
		DefaultNamespaces:            map[string]cache.Config{"b": {}, "a": {}},
		DefaultLabelSelector:         labels.SelectorFromSet(labels.Set{"app": "web"}),
		DefaultFieldSelector:         fields.OneTermEqualSelector("metadata.name", "x"),
		DefaultUnsafeDisableDeepCopy: &yes,
		SyncPeriod:                   &d,
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !defaults.perNamespace || len(defaults.groups) != 1 {
		t.Fatalf("defaults: %+v", defaults)
	}
	g := defaults.groups[0]
	if !reflect.DeepEqual(g.namespaces, []string{"a", "b"}) || g.key != "ns:a,b" || g.oc.label != "app=web" || g.oc.field != "metadata.name=x" || !g.oc.noDeepCopy || g.oc.resync != d {
		t.Errorf("defaults' group: %+v", g)
	}
	no := false
	_, byGVK, err := newPlans(cache.Options{
		Scheme:               scheme.Scheme,
		DefaultNamespaces:    map[string]cache.Config{"b": {}, "a": {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", "x"),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{}, Label: labels.Everything(), UnsafeDisableDeepCopy: &no},
		},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	bo := byGVK[corev1.SchemeGroupVersion.WithKind("ConfigMap")]
	if bo.perNamespace || !bo.namespacesSet || bo.cluster.label != "" || bo.cluster.field != "metadata.name=x" || bo.cluster.noDeepCopy {
		t.Errorf("ByObject: %+v", bo)
	}
	def, _, _ := newPlans(cache.Options{}, false)
	if def.cluster.resync != 10*time.Hour || def.perNamespace {
		t.Errorf("zero options: %+v", def)
	}
}

// TestNamespaceAllBesideNamedNamespaces: a namespace's Config beside
// NamespaceAll is kept, whatever the map order (Go randomizes it): the
// NamespaceAll informer leaves the named namespace out (its field
// selector), and the named one has its own selectors, as in
// controller-runtime. (Before: the first key met decided; "" first
// dropped the other namespace's options silently.)
func TestNamespaceAllBesideNamedNamespaces(t *testing.T) {
	for i := 0; i < 50; i++ {
		p, _, err := newPlans(cache.Options{DefaultNamespaces: map[string]cache.Config{
			cache.AllNamespaces: {},
			"a":                 {LabelSelector: labels.SelectorFromSet(labels.Set{"app": "x"})},
			"b":                 {},
		}}, false)
		if err != nil {
			t.Fatalf("construction %d: %v", i, err)
		}
		want := []group{
			{key: "ns:a", namespaces: []string{"a"}, oc: objConfig{label: "app=x", resync: defaultSyncPeriod}},
			{key: "all", oc: objConfig{field: "metadata.namespace!=a,metadata.namespace!=b", resync: defaultSyncPeriod}},
			{key: "ns:b", namespaces: []string{"b"}, oc: objConfig{resync: defaultSyncPeriod}},
		}
		if !p.perNamespace || !reflect.DeepEqual(sortedGroups(p.groups), sortedGroups(want)) {
			t.Fatalf("construction %d: groups %+v, want %+v", i, p.groups, want)
		}
	}
}

func sortedGroups(gs []group) map[string]group {
	m := map[string]group{}
	for _, g := range gs {
		m[g.key] = g
	}
	return m
}

func TestUnsupportedOptions(t *testing.T) {
	no := false
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	for name, o := range map[string]cache.Options{
		"Options.DefaultEnableWatchBookmarks=false":                 {DefaultEnableWatchBookmarks: &no},
		`Options.DefaultNamespaces["a"].EnableWatchBookmarks=false`: {DefaultNamespaces: map[string]cache.Config{"a": {EnableWatchBookmarks: &no}}},
		`ByObject[*v1.ConfigMap].Namespaces["n"].EnableWatchBookmarks=false`: {ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{"n": {EnableWatchBookmarks: &no}}}}},
	} {
		_, err := NewCache(cfg, o)
		var ue *UnsupportedOptionError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || ue.Option != name {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestTypedTransform(t *testing.T) {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	var userSaw any
	f := transform(func() (runtime.Object, error) { return s.New(gvk) }, func(in any) (any, error) { userSaw = in; return in, nil })
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "n", "labels": map[string]any{"a": "b"}},
		"data":     map[string]any{"k": "v"},
	}}
	out, err := f(u)
	if err != nil {
		t.Fatal(err)
	}
	cm, ok := out.(*corev1.ConfigMap)
	if !ok || cm.Name != "c" || cm.Kind != "" || cm.APIVersion != "" || cm.Data["k"] != "v" || cm.Labels["a"] != "b" || userSaw != out {
		t.Fatalf("converted %T %+v", out, out)
	}
	// Already typed (a delete of a cached object): passed through.
	if again, err := f(cm); err != nil || again != cm {
		t.Errorf("typed input: %v %v", again, err)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": "not a map"}}
	if _, err := f(bad); err == nil {
		t.Error("no error for an object that does not convert")
	}
	if transform(nil, nil) != nil {
		t.Error("a transform with nothing to do")
	}
}

func TestFieldIndexKeys(t *testing.T) {
	if !requiresExactMatch(fields.OneTermEqualSelector("a", "b")) || requiresExactMatch(fields.OneTermNotEqualSelector("a", "b")) || requiresExactMatch(fields.Everything()) {
		t.Error("requiresExactMatch")
	}
	if keyToNamespacedKey("", "v") != "__all_namespaces/v" || keyToNamespacedKey("n", "v") != "n/v" {
		t.Error("keyToNamespacedKey")
	}
}

func TestClassOf(t *testing.T) {
	for obj, want := range map[runtime.Object]class{
		&unstructured.Unstructured{}:        classUnstructured,
		&unstructured.UnstructuredList{}:    classUnstructured,
		&metav1.PartialObjectMetadata{}:     classMetadata,
		&metav1.PartialObjectMetadataList{}: classMetadata,
		&corev1.ConfigMap{}:                 classTyped,
	} {
		if got := classOf(obj); got != want {
			t.Errorf("%T: %v", obj, got)
		}
	}
}

func TestNotStarted(t *testing.T) {
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{}, dynamicinformerOptionsQuiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c.WaitForCacheSync(ctx) {
		t.Error("WaitForCacheSync true before Start")
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if err := c.Start(ctx); err == nil {
		t.Error("second Start")
	}
}

func dynamicinformerOptionsQuiet() dynamicinformer.Options {
	return dynamicinformer.Options{Logger: funcr.New(func(string, string) {}, funcr.Options{})}
}

func TestNotServedErrorIsNotFound(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cause := &dynamicinformer.InformerError{Kind: dynamicinformer.ErrNotServed, Err: errors.New("gone")}
	for _, e := range []*NotServedError{
		{GVK: gvk, Err: cause},
		{GVK: gvk, GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Err: cause},
	} {
		var err error = e
		if !apierrors.IsNotFound(err) || client.IgnoreNotFound(err) != nil {
			t.Errorf("%v: not a NotFound", err)
		}
		if !errors.Is(err, ErrResourceNotServed) || !errors.Is(err, dynamicinformer.ErrNotServed) {
			t.Errorf("%v: errors.Is", err)
		}
	}
}

// TestUnresolvedKindMovesOnto: an informer of a kind no source knows
// keeps the handlers (less those removed) and indexers added to it, and
// moves them onto the factory's informer of the resource once resolved.
func TestUnresolvedKindMovesOnto(t *testing.T) {
	// Discovery answers, and serves no Mouse (nor Gopher).
	opts := dynamicinformerOptionsQuiet()
	opts.Resolver = discoveryresolver.New(&fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"list", "watch"}}},
	}}}})
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := &unstructured.Unstructured{}
	gvk := corev1.SchemeGroupVersion.WithKind("Mouse")
	u.SetGroupVersionKind(gvk)
	got, err := c.GetInformer(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	inf := got.(*Informer)
	if st := inf.Status(); st.State != dynamicinformer.Pending || !errors.Is(st.Err, dynamicinformer.ErrNotServed) || !st.GVR.Empty() {
		t.Fatalf("unresolved: %+v", st)
	}
	keep, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
	if err != nil {
		t.Fatal(err)
	}
	drop, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(drop); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(toolscache.Indexers{"x": func(any) ([]string, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	if !inf.HasSynced() || !keep.HasSynced() || inf.IsStopped() || len(inf.GetStore().List()) != 0 {
		t.Errorf("unresolved: HasSynced %v %v, IsStopped %v", inf.HasSynced(), keep.HasSynced(), inf.IsStopped())
	}
	if err := c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "MouseList"}}); err != nil {
		t.Logf("List before Start: %v", err) // ErrCacheNotStarted
	}
	gvr := corev1.SchemeGroupVersion.WithResource("mice")
	c.mu.Lock()
	inf.e.resolved(gvr, true)
	c.mu.Unlock()
	h, real := inf.e.current()
	if h == nil || h.GVR() != gvr || inf.Status().GVR != gvr {
		t.Fatalf("resolved: handle %v", h)
	}
	if _, ok := real.GetIndexer().GetIndexers()["x"]; !ok {
		t.Error("indexer not moved")
	}
	if keep.(*registration).current() == nil || drop.(*registration).current() != nil {
		t.Error("handlers: the kept one not moved, or the removed one moved")
	}
	if err := inf.RemoveEventHandler(keep); err != nil {
		t.Error(err)
	}
	// RemoveInformer of an unresolved kind: stopped, takes no handler.
	u2 := &unstructured.Unstructured{}
	u2.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Gopher"))
	got2, err := c.GetInformer(ctx, u2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveInformer(ctx, u2); err != nil {
		t.Fatal(err)
	}
	if !got2.IsStopped() {
		t.Error("removed unresolved informer not stopped")
	}
	if _, err := got2.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}); err == nil {
		t.Error("handler added to a removed informer")
	}
	c.factory.Shutdown()
}

// TestNeedLeaderElectionFalse: as controller-runtime's cache, NewCache's
// cache runs on every replica; handed to manager.Add it must not join
// the leader-election group.
func TestNeedLeaderElectionFalse(t *testing.T) {
	c, err := NewCache(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.(*Cache).factory.Shutdown()
	le, ok := c.(manager.LeaderElectionRunnable)
	if !ok {
		t.Fatalf("%T is not a manager.LeaderElectionRunnable: a manager puts it in the leader-election group", c)
	}
	if le.NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true, want false (controller-runtime's cache.New answers false)")
	}
}

// TestNoDiscoveryAnswerIsNotNotServed: a kind is taken as not served only
// from discovery's answer: when discovery cannot be reached, or the
// caller's ctx has ended, GetInformer answers a *LookupError (a Timeout
// wrapping the cause) and makes no informer.
func TestNoDiscoveryAnswerIsNotNotServed(t *testing.T) {
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{}, dynamicinformerOptionsQuiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.factory.Shutdown()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Mouse"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{"unreachable": context.Background(), "cancelled": cancelled} {
		inf, err := c.GetInformer(ctx, u, cache.BlockUntilSynced(false))
		var le *LookupError
		if !errors.As(err, &le) || !apierrors.IsTimeout(err) || apierrors.IsNotFound(err) || errors.Is(err, ErrResourceNotServed) || inf != nil {
			t.Errorf("%s: GetInformer = %v, %v; want a *LookupError (Timeout), no informer", name, inf, err)
		}
		if name == "cancelled" && !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: %v does not wrap context.Canceled", err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d informers recorded from lookups without an answer", n)
	}
}

// fakeMapper maps every kind to a namespaced resource of its lowercased
// kind.
type fakeMapper struct{ apimeta.RESTMapper }

func (fakeMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	return &apimeta.RESTMapping{
		Resource:         schema.GroupVersionResource{Group: gk.Group, Version: versions[0], Resource: strings.ToLower(gk.Kind) + "s"},
		GroupVersionKind: gk.WithVersion(versions[0]),
		Scope:            apimeta.RESTScopeNamespace,
	}, nil
}

// TestNewInformerHonoured: Options.NewInformer makes each informer (as
// controller-runtime's own tests inject theirs): the cache runs it,
// reads wait for its sync (a Timeout until then) and then read its store,
// and no server is needed. (Before: an *UnsupportedOptionError.)
func TestNewInformerHonoured(t *testing.T) {
	var made []*controllertest.FakeInformer
	var mu sync.Mutex
	c, err := NewCache(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{
		Mapper: fakeMapper{},
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, _ time.Duration, _ toolscache.Indexers) toolscache.SharedIndexInformer {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := obj.(*corev1.ConfigMap); !ok || lw == nil {
				t.Errorf("NewInformer got %T and ListerWatcher %v", obj, lw)
			}
			fi := controllertest.NewFakeInformer()
			made = append(made, fi)
			return fi
		},
	})
	if err != nil {
		t.Fatalf("NewCache with NewInformer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- c.Start(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for !c.(*Cache).isStarted() {
		select {
		case <-ctx.Done():
			t.Fatal("the cache did not start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(made)
	mu.Unlock()
	if n != 1 || inf.HasSynced() {
		t.Fatalf("%d informers made, HasSynced %v; want 1, false", n, inf.HasSynced())
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := c.List(short, &corev1.ConfigMapList{}); !apierrors.IsTimeout(err) {
		t.Fatalf("List before the informer synced = %v, want a Timeout", err)
	}
	made[0].Synced()
	var l corev1.ConfigMapList
	if err := c.List(ctx, &l); err != nil {
		t.Fatalf("List after the informer synced: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "n", Name: "missing"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object = %v, want NotFound", err)
	}
}

func TestNamespaceNotCachedError(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	for _, e := range []*NamespaceNotCachedError{
		{GVK: gvk, Namespace: "x", Name: "a"},
		{GVK: gvk, Namespace: "x", List: true},
	} {
		var err error = e
		if !errors.Is(err, ErrNamespaceNotCached) || apierrors.IsNotFound(err) {
			t.Errorf("%v: errors.Is %v, NotFound %v", err, errors.Is(err, ErrNamespaceNotCached), apierrors.IsNotFound(err))
		}
	}
	if got := (&NamespaceNotCachedError{Namespace: "x", Name: "a"}).Error(); got != "unable to get: x/a because of unknown namespace for the cache" {
		t.Errorf("Get message %q (controller-runtime's)", got)
	}
}

// TestPendingKindClusterScopedTakesClusterConfig: a kind not known when
// its informers are made is taken as namespaced, one informer per
// namespace config; if it turns out cluster-scoped, each takes the
// kind's cluster config (the Default* settings, not a namespace's), so
// they are one factory informer with the defaults' settings.
func TestPendingKindClusterScopedTakesClusterConfig(t *testing.T) {
	opts := dynamicinformerOptionsQuiet()
	opts.Resolver = discoveryresolver.New(&fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"list", "watch"}}},
	}}}})
	yes := true
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{DefaultNamespaces: map[string]cache.Config{
		"a": {LabelSelector: labels.SelectorFromSet(labels.Set{"app": "x"}), UnsafeDisableDeepCopy: &yes},
		"b": {},
	}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.factory.Shutdown()
	u := &unstructured.Unstructured{}
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gopher"}
	u.SetGroupVersionKind(gvk)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.GetInformer(ctx, u); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	k := c.kinds[kindKey{gvk: gvk, class: classUnstructured}]
	c.mu.Unlock()
	if len(k.entries) != 2 {
		t.Fatalf("%d informers for a pending kind under two namespace configs, want 2", len(k.entries))
	}
	gvr := gvk.GroupVersion().WithResource("gophers")
	c.mu.Lock()
	for _, e := range k.entries {
		e.resolved(gvr, false)
	}
	c.mu.Unlock()
	n := 0
	for _, st := range c.factory.Statuses() {
		if st.GVR == gvr {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d factory informers of the cluster-scoped kind, want 1 (both with the cluster config)", n)
	}
	for _, e := range k.entries {
		if !e.deepCopy(nil) || e.oc.label != "" {
			t.Errorf("informer %q: deep copy %v, label %q; want the defaults' (copies, no selector)", e.group, e.deepCopy(nil), e.oc.label)
		}
	}
	if e, ok := k.forNamespace(""); !ok || e != k.entries[0] {
		t.Errorf("a cluster-scoped key reads informer %v", e)
	}
}
