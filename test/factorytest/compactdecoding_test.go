package factorytest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/test/controlplane"
)

// decodedStore is a compact informer's store as readers see it: List
// returns each *cache.Compact decoded (a fresh *unstructured.Unstructured),
// and fails the test on any other type.
type decodedStore struct {
	toolscache.Store
	t *testing.T
}

func (s decodedStore) List() []interface{} {
	objs := s.Store.List()
	out := make([]interface{}, 0, len(objs))
	for _, o := range objs {
		c, ok := o.(*ikcache.Compact)
		if !ok {
			s.t.Errorf("compact store holds %T", o)
			continue
		}
		u, err := c.Decode()
		if err != nil {
			s.t.Errorf("Decode of %s/%s: %v", c.GetObjectMeta().GetNamespace(), c.GetObjectMeta().GetName(), err)
			continue
		}
		out = append(out, u)
	}
	return out
}

// TestCompactDecodingSameAsClientGo: informers with a compact projection
// of a NewForConfig factory, whose objects are decoded straight from the
// JSON to the compact encoding, hold objects that decode
// reflect.DeepEqual to client-go's dynamic informer's, over a custom
// resource and ConfigMaps, after the initial sync and after creates,
// updates and deletes: for all namespaces, for two namespaces (a merged
// list and watch), with managed fields stripped (skipped while decoding),
// and for comparison with an opaque transform (decoded to maps, then
// compacted). (A Compactor's Transform given as WithTransform is refused:
// dynamicinformer's TestOwnTransformsOnePath.)
func TestCompactDecodingSameAsClientGo(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	gvr, ns, ns2 := seedDecoding(t, ctx, "compact")
	createConfigMaps(t, ctx, 20, func(i int) *corev1.ConfigMap {
		cm := decodingConfigMap([]string{ns, ns2}[i%2], i)
		cm.Labels = map[string]string{"i": fmt.Sprint(i)}
		cm.Data["k"] += ` "\`
		return cm
	})

	leaks := controlplane.SnapshotGoroutines()
	ik := newFactory(t, cp.Config())
	theirs := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	theirsStripped := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	stop := make(chan struct{})
	compact := dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true})
	type variant struct {
		name     string
		opts     []dynamicinformer.ResourceOption
		stripped bool
	}
	variants := []variant{
		{"all", []dynamicinformer.ResourceOption{compact}, false},
		{"two-namespaces", []dynamicinformer.ResourceOption{compact, dynamicinformer.WithNamespaces(ns, ns2)}, false},
		{"strip-managed-fields", []dynamicinformer.ResourceOption{dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true, StripManagedFields: true})}, true},
		{"opaque-transform", []dynamicinformer.ResourceOption{compact, dynamicinformer.WithTransform("intern", ikcache.InternKeys)}, false},
	}
	var groups []storeGroup
	var views []viewGroup
	for _, r := range []schema.GroupVersionResource{gvr, configmaps} {
		ref := theirs.ForResource(r).Informer()
		refStripped := theirsStripped.ForResource(r).Informer()
		if err := refStripped.SetTransform(ikcache.StripManagedFields); err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			reference := ref.GetStore()
			if v.stripped {
				reference = refStripped.GetStore()
			}
			for _, n := range []string{ns, ns2} {
				h := ik.ForResource(r, v.opts...)
				groups = append(groups, storeGroup{gvr: r, ns: n, name: r.Resource + "/" + v.name + "/" + n, stores: map[string]toolscache.Store{
					"client-go": reference,
					"compact":   decodedStore{Store: h.Informer().GetStore(), t: t},
				}})
				views = append(views, viewGroup{name: r.Resource + "/" + v.name + "/" + n, ns: n, lister: genericlister.New(h.Informer().GetIndexer(), h.GVR().GroupResource()), reference: reference})
			}
		}
	}
	ik.Start(ctx)
	theirs.Start(stop)
	theirsStripped.Start(stop)
	sameContentsAll(t, ctx, "after sync", groups)
	sameViews(t, "after sync", views)
	// The compact stores hold the objects (not equal merely for being
	// empty), managedFields only where not stripped.
	for _, g := range groups {
		if n := checkManagedFields(t, g, "compact", g.name == g.gvr.Resource+"/strip-managed-fields/"+g.ns); n < 10 {
			t.Fatalf("%s: %d objects in the namespace", g.name, n)
		}
	}

	// Creates, updates (spec and metadata), deletes.
	writeDecodingObjects(t, ctx, gvr, ns, ns2)
	writeConfigMaps(t, ctx, []string{ns, ns2}, 6, 10)
	sameContentsAll(t, ctx, "after writes", groups)
	sameViews(t, "after writes", views)
	ik.Shutdown()
	close(stop)
	theirs.Shutdown()
	theirsStripped.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// viewGroup is a compact informer's namespace read as views
// (genericlister's ListCompact) beside client-go's store of the same
// objects.
type viewGroup struct {
	name, ns  string
	lister    *genericlister.Lister
	reference toolscache.Store
}

// sameViews checks, once the stores agree, that every object ListCompact
// returns reads, without decoding, as client-go's object: every
// metav1.Object getter of its GetObjectMeta, and NestedField of every field path (to depth 6)
// and of paths that are absent or go through a scalar.
func sameViews(t *testing.T, when string, groups []viewGroup) {
	t.Helper()
	for _, g := range groups {
		views, err := g.lister.Namespace(g.ns).ListCompact(labels.Everything())
		if err != nil {
			t.Fatalf("%s %s: ListCompact: %v", g.name, when, err)
		}
		if len(views) == 0 {
			t.Fatalf("%s %s: no objects", g.name, when)
		}
		for _, v := range views {
			key := v.GetObjectMeta().GetNamespace() + "/" + v.GetObjectMeta().GetName()
			obj, ok, err := g.reference.GetByKey(key)
			if err != nil || !ok {
				t.Fatalf("%s %s: %s is not in client-go's store (%v)", g.name, when, key, err)
			}
			want := obj.(*unstructured.Unstructured)
			type meta struct {
				Namespace, Name, GenerateName, UID, RV string
				Generation                             int64
				Created                                metav1.Time
				Deleted                                *metav1.Time
				Labels, Annotations                    map[string]string
				Finalizers                             []string
				Owners                                 []metav1.OwnerReference
				Managed                                []metav1.ManagedFieldsEntry
			}
			of := func(o metav1.Object) meta {
				return meta{o.GetNamespace(), o.GetName(), o.GetGenerateName(), string(o.GetUID()), o.GetResourceVersion(),
					o.GetGeneration(), o.GetCreationTimestamp(), o.GetDeletionTimestamp(), o.GetLabels(), o.GetAnnotations(),
					o.GetFinalizers(), o.GetOwnerReferences(), o.GetManagedFields()}
			}
			if got, exp := of(v.GetObjectMeta()), of(want); !reflect.DeepEqual(got, exp) {
				t.Fatalf("%s %s: %s: metadata of the view\n%+v\nwant\n%+v", g.name, when, key, got, exp)
			}
			for _, p := range fieldPaths(want.Object, nil, 6) {
				got, gotFound, gotErr := v.NestedField(p...)
				exp, expFound, expErr := unstructured.NestedFieldCopy(want.Object, p...)
				if gotFound != expFound || !reflect.DeepEqual(got, exp) || fmt.Sprint(gotErr) != fmt.Sprint(expErr) {
					t.Fatalf("%s %s: %s: NestedField(%q) = %v, %v, %v; want %v, %v, %v", g.name, when, key, p, got, gotFound, gotErr, exp, expFound, expErr)
				}
			}
		}
	}
}

// fieldPaths lists the path of every field of m to depth, and beside
// each an absent key and a path through it.
func fieldPaths(m map[string]interface{}, prefix []string, depth int) [][]string {
	out := [][]string{append(append([]string{}, prefix...), "no-such-field")}
	if depth == 0 {
		return out
	}
	for k, v := range m {
		p := append(append([]string{}, prefix...), k)
		out = append(out, p, append(append([]string{}, p...), "beyond"))
		if sub, ok := v.(map[string]interface{}); ok {
			out = append(out, fieldPaths(sub, p, depth-1)...)
		}
	}
	return out
}
