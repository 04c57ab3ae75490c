package crcachetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/test/controlplane"
)

// fixture is a Widget CRD and ConfigMaps in three namespaces:
// ns[0]: w-0..w-5 (app=web even, app=db odd; tier=x for w-0, w-3),
// ns[1]: w-0..w-2, ns[2]: w-0; ConfigMaps c-<i> alike.
type fixture struct {
	crd *crdDef
	ns  []string
}

func newFixture(t *testing.T, ctx context.Context) *fixture {
	t.Helper()
	f := &fixture{crd: newWidgetCRD()}
	f.crd.install(t, ctx)
	for range 3 {
		f.ns = append(f.ns, newNamespace(t, ctx))
	}
	for j, n := range []int{6, 3, 1} {
		for i := range n {
			l := map[string]string{"app": "web"}
			if i%2 == 1 {
				l["app"] = "db"
			}
			if i%3 == 0 && j == 0 {
				l["tier"] = "x"
			}
			f.crd.create(t, ctx, f.ns[j], fmt.Sprintf("w-%d", i), l)
			createConfigMap(t, ctx, f.ns[j], fmt.Sprintf("c-%d", i), l)
		}
	}
	return f
}

// indexFields registers the same field indexes on c: spec.value of
// Widgets (unstructured and typed), data.k of ConfigMaps.
func (f *fixture) indexFields(t *testing.T, ctx context.Context) func(crcache.Cache) {
	return func(c crcache.Cache) {
		if err := c.IndexField(ctx, f.crd.u(), "spec.value", func(o client.Object) []string {
			v, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "spec", "value")
			return []string{v}
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.IndexField(ctx, &Widget{}, "spec.value", func(o client.Object) []string {
			return []string{o.(*Widget).Spec.Value}
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.IndexField(ctx, &corev1.ConfigMap{}, "data.k", func(o client.Object) []string {
			return []string{o.(*corev1.ConfigMap).Data["k"]}
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// compareList lists with opts on both caches and requires the same
// answer: both fail, or the same objects (limited: the same number of
// objects, each in the unlimited answer, as the order is the cache's).
//
// Cluster-wide lists also hold the objects of the package's other tests,
// which run side by side and keep writing: the two caches see each write
// a moment apart. A difference is therefore asked again, for up to 10 s,
// until both caches give the same answer; what is reported is the last
// difference seen. Within the test's own objects nothing changes, so a
// real difference stays and fails.
func compareList(t *testing.T, ctx context.Context, p pair, what string, newList func() client.ObjectList, opts ...client.ListOption) int {
	t.Helper()
	var n int
	var diffs []string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n, diffs = diffList(ctx, p, what, newList, opts...)
		return len(diffs) == 0, nil
	})
	for _, d := range diffs {
		t.Error(d)
	}
	return n
}

// diffList is one round of compareList: the count and the differences.
func diffList(ctx context.Context, p pair, what string, newList func() client.ObjectList, opts ...client.ListOption) (int, []string) {
	a, b := newList(), newList()
	errA, errB := p.ik.List(ctx, a, opts...), p.cr.List(ctx, b, opts...)
	if (errA == nil) != (errB == nil) {
		return 0, []string{fmt.Sprintf("%s: informerkit: %v; controller-runtime: %v", what, errA, errB)}
	}
	if errA != nil {
		return 0, nil
	}
	ka, errKa := keyedErr(a)
	kb, errKb := keyedErr(b)
	if err := errors.Join(errKa, errKb); err != nil {
		return 0, []string{fmt.Sprintf("%s: %v", what, err)}
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if a.GetContinue() != b.GetContinue() {
		return len(ka), []string{fmt.Sprintf("%s: continue %q, controller-runtime %q", what, a.GetContinue(), b.GetContinue())}
	}
	if lo.Limit > 0 {
		if len(ka) != len(kb) {
			return len(ka), []string{fmt.Sprintf("%s: %d objects, controller-runtime %d", what, len(ka), len(kb))}
		}
		return len(ka), nil
	}
	if !slices.Equal(sortedKeys(ka), sortedKeys(kb)) {
		return len(ka), []string{fmt.Sprintf("%s: objects %v, controller-runtime %v", what, sortedKeys(ka), sortedKeys(kb))}
	}
	var diffs []string
	for k, oa := range ka {
		if d := cmp.Diff(kb[k], oa); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: %s differs (-controller-runtime +informerkit):\n%s", what, k, d))
		}
	}
	return len(ka), diffs
}

func compareGet(t *testing.T, ctx context.Context, p pair, what string, key client.ObjectKey, newObj func() client.Object) {
	t.Helper()
	a, b := newObj(), newObj()
	errA, errB := p.ik.Get(ctx, key, a), p.cr.Get(ctx, key, b)
	if (errA == nil) != (errB == nil) || apierrors.IsNotFound(errA) != apierrors.IsNotFound(errB) {
		t.Errorf("%s: informerkit: %v; controller-runtime: %v", what, errA, errB)
		return
	}
	if errA == nil {
		if d := cmp.Diff(b, a); d != "" {
			t.Errorf("%s differs (-controller-runtime +informerkit):\n%s", what, d)
		}
	}
}

// TestCRReadsMatchControllerRuntime: Get and List of unstructured,
// typed (built-in and CRD) and metadata-only objects, with namespaces,
// label selectors, IndexField field selectors, Limit, Continue and the
// errors, answer as controller-runtime's cache does.
func TestCRReadsMatchControllerRuntime(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	f := newFixture(t, ctx)
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme}, f.indexFields(t, ctx))
	ns := f.ns[0]
	lists := map[string]func() client.ObjectList{
		"unstructured": func() client.ObjectList { return f.crd.ulist() },
		"typed CRD":    func() client.ObjectList { return &WidgetList{} },
		"ConfigMap":    func() client.ObjectList { return &corev1.ConfigMapList{} },
		"metadata": func() client.ObjectList {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			return l
		},
	}
	web := client.MatchingLabels{"app": "web"}
	sel, err := labels.Parse("app in (web,db),!tier")
	if err != nil {
		t.Fatal(err)
	}
	for name, newList := range lists {
		field, value := "spec.value", "w-1"
		if name == "ConfigMap" || name == "metadata" {
			field, value = "data.k", "c-1"
		}
		inNS := func(n int) bool { return n > 0 }
		cases := []struct {
			what string
			opts []client.ListOption
			want func(int) bool
		}{
			{"all", nil, inNS},
			{"namespace", []client.ListOption{client.InNamespace(ns)}, func(n int) bool { return n == 6 }},
			{"labels", []client.ListOption{web}, inNS},
			{"namespace+labels", []client.ListOption{client.InNamespace(ns), web}, func(n int) bool { return n == 3 }},
			{"set selector", []client.ListOption{client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}}, func(n int) bool { return n == 4 }},
			{"limit", []client.ListOption{client.InNamespace(ns), client.Limit(2)}, func(n int) bool { return n == 2 }},
			{"continue", []client.ListOption{client.Continue("x")}, nil},
			{"unsafe", []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}, func(n int) bool { return n == 6 }},
		}
		if name != "metadata" { // no field index on PartialObjectMetadata ConfigMaps
			cases = append(cases, []struct {
				what string
				opts []client.ListOption
				want func(int) bool
			}{
				// Cluster-wide: 2 per fixture, this test's and those of the
				// package's other tests (which may be half made: they run
				// side by side).
				{"field", []client.ListOption{client.MatchingFields{field: value}}, func(n int) bool { return n >= 2 }},
				{"namespace+field", []client.ListOption{client.InNamespace(ns), client.MatchingFields{field: value}}, func(n int) bool { return n == 1 }},
				{"field+labels", []client.ListOption{client.MatchingFields{field: value}, client.MatchingLabels{"app": "db"}}, func(n int) bool { return n >= 2 }},
				{"field not indexed", []client.ListOption{client.MatchingFields{"metadata.uid": "x"}}, nil},
				{"non-exact field", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector(field, value)}}, nil},
			}...)
		}
		for _, c := range cases {
			n := compareList(t, ctx, p, name+" "+c.what, newList, c.opts...)
			if c.want != nil && !c.want(n) {
				t.Errorf("%s %s: %d objects", name, c.what, n)
			}
		}
	}

	key := client.ObjectKey{Namespace: ns, Name: "w-1"}
	compareGet(t, ctx, p, "unstructured Get", key, func() client.Object { return f.crd.u() })
	compareGet(t, ctx, p, "typed CRD Get", key, func() client.Object { return &Widget{} })
	compareGet(t, ctx, p, "missing Get", client.ObjectKey{Namespace: ns, Name: "nope"}, func() client.Object { return f.crd.u() })
	cmKey := client.ObjectKey{Namespace: ns, Name: "c-1"}
	compareGet(t, ctx, p, "ConfigMap Get", cmKey, func() client.Object { return &corev1.ConfigMap{} })
	compareGet(t, ctx, p, "metadata Get", cmKey, func() client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return m
	})

	var w Widget
	if err := p.ik.Get(ctx, key, &w); err != nil || w.Spec.Value != "w-1" {
		t.Errorf("typed Get: %v, spec %+v", err, w.Spec)
	}
}

// TestCRUnsafeDisableDeepCopyShares: with DefaultUnsafeDisableDeepCopy
// (and the per-call option) reads return the cache's objects (the same
// pointer twice), as controller-runtime's; without, copies.
func TestCRUnsafeDisableDeepCopyShares(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	f := newFixture(t, ctx)
	yes := true
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme, DefaultUnsafeDisableDeepCopy: &yes}, nil)
	q := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme}, nil)
	first := func(c crcache.Cache, opts ...client.ListOption) runtime.Object {
		l := f.crd.ulist()
		if err := c.List(ctx, l, append(opts, client.InNamespace(f.ns[0]), client.MatchingLabels{"tier": "x", "app": "db"})...); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 {
			t.Fatalf("%d items", len(l.Items))
		}
		var o runtime.Object
		_ = apimeta.EachListItem(l, func(obj runtime.Object) error { o = obj; return nil })
		return o
	}
	for _, c := range []struct {
		name   string
		c      crcache.Cache
		opts   []client.ListOption
		shared bool
	}{
		{"informerkit default unsafe", p.ik, nil, true},
		{"controller-runtime default unsafe", p.cr, nil, true},
		{"informerkit", q.ik, nil, false},
		{"controller-runtime", q.cr, nil, false},
		{"informerkit per call", q.ik, []client.ListOption{client.UnsafeDisableDeepCopy}, true},
		{"controller-runtime per call", q.cr, []client.ListOption{client.UnsafeDisableDeepCopy}, true},
	} {
		// UnstructuredList items are values: compare their maps.
		a, b := first(c.c, c.opts...), first(c.c, c.opts...)
		ma := a.(*unstructured.Unstructured).Object
		mb := b.(*unstructured.Unstructured).Object
		shared := reflect.ValueOf(ma).UnsafePointer() == reflect.ValueOf(mb).UnsafePointer()
		if shared != c.shared {
			t.Errorf("%s: shared %v, want %v", c.name, shared, c.shared)
		}
	}
}

// TestCROptionsMatchControllerRuntime: DefaultNamespaces,
// DefaultLabelSelector, DefaultFieldSelector, DefaultTransform and
// ByObject select and shape the same objects as in controller-runtime's
// cache.
func TestCROptionsMatchControllerRuntime(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	f := newFixture(t, ctx)
	annotate := func(in any) (any, error) {
		if m, err := apimeta.Accessor(in); err == nil {
			m.SetAnnotations(map[string]string{"transformed": "yes"})
		}
		return in, nil
	}
	cases := []struct {
		name string
		opts crcache.Options
		want map[string]int // list -> objects
	}{
		{"DefaultNamespaces", crcache.Options{DefaultNamespaces: map[string]crcache.Config{f.ns[0]: {}, f.ns[2]: {}}},
			map[string]int{"widgets": 7, "configmaps": -1}},
		{"DefaultLabelSelector", crcache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"app": "db"})},
			map[string]int{"widgets": 4, "configmaps": -1}},
		{"DefaultFieldSelector", crcache.Options{DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", "w-2")},
			map[string]int{"widgets": 2, "configmaps": 0}},
		{"DefaultTransform", crcache.Options{DefaultTransform: annotate},
			map[string]int{"widgets": 10, "configmaps": -1}},
		{"ByObject", crcache.Options{
			DefaultNamespaces: map[string]crcache.Config{f.ns[0]: {}},
			ByObject: map[client.Object]crcache.ByObject{
				f.crd.u(): {Label: labels.SelectorFromSet(labels.Set{"app": "web"}), Namespaces: map[string]crcache.Config{f.ns[1]: {}}, Transform: annotate},
			}},
			map[string]int{"widgets": 2, "configmaps": -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Scheme = f.crd.scheme
			p := newPair(t, ctx, cp.Config(), c.opts, nil)
			n := compareList(t, ctx, p, "widgets", func() client.ObjectList { return f.crd.ulist() })
			if n != c.want["widgets"] {
				t.Errorf("widgets: %d, want %d", n, c.want["widgets"])
			}
			n = compareList(t, ctx, p, "configmaps", func() client.ObjectList { return &corev1.ConfigMapList{} })
			if w := c.want["configmaps"]; w >= 0 && n != w {
				t.Errorf("configmaps: %d, want %d", n, w)
			}
		})
	}
}

// TestCRSyncPeriodResyncs: SyncPeriod replays the cache to handlers (an
// update with old == new), in both caches.
func TestCRSyncPeriodResyncs(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	f := newFixture(t, ctx)
	period := time.Second
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme, SyncPeriod: &period,
		DefaultNamespaces: map[string]crcache.Config{f.ns[2]: {}}}, nil)
	for _, c := range []crcache.Cache{p.ik, p.cr} {
		inf, err := c.GetInformer(ctx, f.crd.u())
		if err != nil {
			t.Fatal(err)
		}
		var resyncs atomic.Int64
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
			if reflect.DeepEqual(o, n) {
				resyncs.Add(1)
			}
		}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "two resyncs", func() bool { return resyncs.Load() >= 2 })
	}
}

// TestCRReaderFailOnMissingInformer: with the option, reads of a kind
// without an informer are *cache.ErrResourceNotCached in both caches, and
// work once the informer is made.
func TestCRReaderFailOnMissingInformer(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	f := newFixture(t, ctx)
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme, ReaderFailOnMissingInformer: true}, nil)
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		var l corev1.ConfigMapList
		var nc *crcache.ErrResourceNotCached
		if err := c.List(ctx, &l); !errors.As(err, &nc) {
			t.Errorf("%s: List without informer: %v", name, err)
		}
		if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
	}
	compareList(t, ctx, p, "after GetInformer", func() client.ObjectList { return &corev1.ConfigMapList{} }, client.InNamespace(f.ns[0]))
}

// TestCRInformerMatchesControllerRuntime: the informers deliver the same
// adds, honour RemoveEventHandler, take indexers, report HasSynced and
// IsStopped after RemoveInformer, as controller-runtime's.
func TestCRInformerMatchesControllerRuntime(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	f := newFixture(t, ctx)
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme}, nil)
	type rec struct {
		adds, late atomic.Int64
		inf        crcache.Informer
		reg        toolscache.ResourceEventHandlerRegistration
	}
	recs := map[string]*rec{"informerkit": {}, "controller-runtime": {}}
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		r := recs[name]
		inf, err := c.GetInformerForKind(ctx, f.crd.gvk)
		if err != nil {
			t.Fatal(err)
		}
		if !inf.HasSynced() || inf.IsStopped() {
			t.Errorf("%s: HasSynced %v IsStopped %v", name, inf.HasSynced(), inf.IsStopped())
		}
		if err := inf.AddIndexers(toolscache.Indexers{"byValue": func(o any) ([]string, error) { return []string{o.(*Widget).Spec.Value}, nil }}); err != nil {
			t.Errorf("%s: AddIndexers: %v", name, err)
		}
		r.inf = inf
		r.reg, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { r.adds.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
			if o.(*Widget).Name == "late" {
				r.late.Add(1)
			}
		}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, name+" adds", func() bool { return r.reg.HasSynced() && r.adds.Load() == 10 })
		if err := inf.RemoveEventHandler(r.reg); err != nil {
			t.Errorf("%s: RemoveEventHandler: %v", name, err)
		}
	}
	f.crd.create(t, ctx, f.ns[0], "late", nil)
	for name, r := range recs {
		eventually(t, ctx, name+" late add", func() bool { return r.late.Load() == 1 })
		if r.adds.Load() != 10 {
			t.Errorf("%s: removed handler got %d adds", name, r.adds.Load())
		}
	}
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		if err := c.RemoveInformer(ctx, &Widget{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, name+" IsStopped", recs[name].inf.IsStopped)
	}
}

// TestCRUnsupportedOptionsAreErrors: options the cache does not
// implement are an *UnsupportedOptionError naming them, not ignored.
func TestCRUnsupportedOptionsAreErrors(t *testing.T) {
	controlplane.Parallel(t)
	cfg := cp.Config()
	no := false
	for name, opts := range map[string]crcache.Options{
		"Options.DefaultWatchErrorHandler":                          {DefaultWatchErrorHandler: func(context.Context, *toolscache.Reflector, error) {}},
		"Options.DefaultEnableWatchBookmarks=false":                 {DefaultEnableWatchBookmarks: &no},
		`Options.DefaultNamespaces["a"].EnableWatchBookmarks=false`: {DefaultNamespaces: map[string]crcache.Config{"a": {EnableWatchBookmarks: &no}}},
	} {
		_, err := controllerruntime.NewCache(cfg, opts)
		var ue *controllerruntime.UnsupportedOptionError
		if !errors.Is(err, controllerruntime.ErrUnsupported) || !errors.As(err, &ue) || ue.Option != name {
			t.Errorf("%s: %v", name, err)
		}
	}
}
