package genericlister

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamiclister"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/labelindex"
)

// benchIndexer returns an informer-like indexer (namespace index plus the
// given label indexers) with n objects in 10 namespaces. Each has its own metadata
// with four labels — app=app-<i%100> (so "app=app-7" matches 1%), tier,
// env and a unique instance label — and shares one 20-field spec map with
// the others (List never reads the spec; sharing keeps 100k objects
// affordable on a shared machine).
func benchIndexer(n int, indexers toolscache.Indexers) toolscache.Indexer {
	spec := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		spec[fmt.Sprintf("field%02d", k)] = fmt.Sprintf("value-%02d", k)
	}
	indexers[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "bench.example.com/v1",
			"kind":       "Widget",
			"metadata": map[string]interface{}{
				"name":            fmt.Sprintf("widget-%06d", i),
				"namespace":       fmt.Sprintf("ns-%d", i%10),
				"uid":             fmt.Sprintf("uid-%06d", i),
				"resourceVersion": fmt.Sprint(i + 1),
				"labels": map[string]interface{}{
					"app":      fmt.Sprintf("app-%d", i%100),
					"tier":     []string{"front", "back", "cache"}[i%3],
					"env":      []string{"prod", "staging"}[i%2],
					"instance": fmt.Sprintf("inst-%06d", i),
				},
			},
			"spec": spec,
		}}
		if err := idx.Add(u); err != nil {
			panic(err)
		}
	}
	return idx
}

var benchGVR = schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}

// BenchmarkList compares a label-selector List through client-go's
// dynamiclister (a scan of the whole cache) with genericlister (label
// index), in the same run. "impl=informerkit" reads an indexer with the
// inverted cache.LabelIndex; "impl=informerkit-keys" one with the factory's
// default, per-key label indexes added on demand (the first List, in the
// benchmark's warm-up, adds them). client-go reads the first indexer.
// Selectors: "app=app-7"
// (1% of objects); "app=app-7,tier!=back" (an indexed and a non-indexable
// requirement); "app in (app-7,app-8),env" ; and namespace-scoped
// "app=app-7" in ns-7 (0.1%); and everything in ns-7 (10%, through the
// namespace index in both).
func BenchmarkList(b *testing.B) {
	selectors := []struct{ name, sel, ns string }{
		{"eq", "app=app-7", ""},
		{"eq+neq", "app=app-7,tier!=back", ""},
		{"in+exists", "app in (app-7,app-8),env", ""},
		{"ns+eq", "app=app-7", "ns-7"},
		{"ns+all", "", "ns-7"},
	}
	for _, n := range []int{10000, 100000} {
		idx := benchIndexer(n, labelindex.LabelIndexers())
		keyIdx := benchIndexer(n, ikcache.AutoLabelKeyIndexers())
		for _, s := range selectors {
			sel, err := labels.Parse(s.sel)
			if err != nil {
				b.Fatal(err)
			}
			want := -1
			check := func(b *testing.B, got int) {
				if want < 0 {
					want = got
				} else if got != want {
					b.Fatalf("%d results, another lister found %d", got, want)
				}
			}
			type listFunc func(ns string, sel labels.Selector) ([]*unstructured.Unstructured, error)
			cg := dynamiclister.New(idx, benchGVR)
			ik := New(idx, benchGVR.GroupResource())
			ikKeys := New(keyIdx, benchGVR.GroupResource())
			for _, impl := range []struct {
				name string
				list listFunc
			}{
				{"clientgo", func(ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
					if ns == "" {
						return cg.List(sel)
					}
					return cg.Namespace(ns).List(sel)
				}},
				{"informerkit", func(ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
					if ns == "" {
						return ik.List(sel)
					}
					return ik.Namespace(ns).List(sel)
				}},
				{"informerkit-keys", func(ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
					if ns == "" {
						return ikKeys.List(sel)
					}
					return ikKeys.Namespace(ns).List(sel)
				}},
			} {
				b.Run(fmt.Sprintf("n=%d/%s/impl=%s", n, s.name, impl.name), func(b *testing.B) {
					b.ReportAllocs()
					var got []*unstructured.Unstructured
					for it := 0; it < b.N; it++ {
						if got, err = impl.list(s.ns, sel); err != nil {
							b.Fatal(err)
						}
					}
					check(b, len(got))
				})
			}
		}
	}
}

// BenchmarkListMetadata is an all-match List over a metadata-only cache
// (*metav1.PartialObjectMetadata, as a metadata-only informer fills it):
// "as-stored" through Typed, as client-go's metadatalister reads it, and
// "converted" through a Lister made with ConvertToUnstructured, which
// builds a fresh Unstructured per object (what genericlister.New did for
// every such cache before the conversion had to be asked for).
func BenchmarkListMetadata(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
		for i := 0; i < n; i++ {
			p := &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "bench.example.com/v1", Kind: "Widget"},
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("widget-%06d", i), Namespace: fmt.Sprintf("ns-%d", i%10),
					UID: types.UID(fmt.Sprintf("uid-%06d", i)), ResourceVersion: fmt.Sprint(i + 1),
					Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%100), "instance": fmt.Sprintf("inst-%06d", i)},
				},
			}
			if err := idx.Add(p); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("N=%d/as-stored", n), func(b *testing.B) {
			l := NewTyped[*metav1.PartialObjectMetadata](idx, benchGVR.GroupResource())
			for b.Loop() {
				if objs, err := l.List(labels.Everything()); err != nil || len(objs) != n {
					b.Fatalf("List = %d objects, %v", len(objs), err)
				}
			}
		})
		b.Run(fmt.Sprintf("N=%d/converted", n), func(b *testing.B) {
			l := New(idx, benchGVR.GroupResource(), ConvertToUnstructured())
			for b.Loop() {
				if objs, err := l.List(labels.Everything()); err != nil || len(objs) != n {
					b.Fatalf("List = %d objects, %v", len(objs), err)
				}
			}
		})
	}
}
