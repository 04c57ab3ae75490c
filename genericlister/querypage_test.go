package genericlister

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/query"
)

// TestQuery: Lister.Query (label and namespace indexes narrowing, plain
// and compact caches) pages through the same answer as query.Scan over
// the plain objects, and NamespaceLister.Query stays in its namespace.
func TestQuery(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	plain := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	indexers := func() toolscache.Indexers { // each indexer its own on-demand label index marker
		out := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
		for k, v := range ikcache.AutoLabelKeyIndexers() {
			out[k] = v
		}
		return out
	}
	indexed := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers())
	compact := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers())
	compactor := ikcache.NewCompactor(ikcache.CompactorOptions{})
	for i := 0; i < 400; i++ {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{
				"namespace": []string{"a", "b", "c"}[i%3], "name": fmt.Sprintf("w%03d", i),
				"resourceVersion": fmt.Sprint(i + 1),
				"labels":          map[string]interface{}{"app": []string{"web", "db"}[i%2], "tier": fmt.Sprint(i % 5)},
			},
			"spec": map[string]interface{}{"replicas": int64(i % 9), "zone": []interface{}{"z1", fmt.Sprintf("z%d", i%4)}},
		}}
		for _, idx := range []toolscache.Indexer{plain, indexed} {
			if err := idx.Add(u); err != nil {
				t.Fatal(err)
			}
		}
		c, err := compactor.Transform(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if err := compact.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(run func(query.Query) ([]string, string, error), q query.Query) []string {
		var out []string
		for {
			keys, next, err := run(q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, keys...)
			if next == "" {
				return out
			}
			q.Continue = next
		}
	}
	lister := func(l interface {
		Query(query.Query) (*query.Page[*unstructured.Unstructured], error)
	}) func(query.Query) ([]string, string, error) {
		return func(q query.Query) ([]string, string, error) {
			p, err := l.Query(q)
			if err != nil {
				return nil, "", err
			}
			var keys []string
			for _, u := range p.Items {
				keys = append(keys, u.GetNamespace()+"/"+u.GetName())
			}
			return keys, p.Continue, nil
		}
	}
	scan := func(q query.Query) ([]string, string, error) {
		p, err := query.Scan(query.FromIndexer(plain), q)
		if err != nil {
			return nil, "", err
		}
		var keys []string
		for _, o := range p.Items {
			k, _ := toolscache.MetaNamespaceKeyFunc(o.(runtime.Object))
			keys = append(keys, k)
		}
		return keys, p.Continue, nil
	}
	for _, q := range []query.Query{
		query.New().WithLabels("app=web").Where("spec.replicas", query.Ge, query.Int(4)).SortBy(query.Desc("spec.replicas")).WithLimit(13),
		query.New().InNamespaces("b").WithLabels("tier in (1,2)").Where("spec.zone", query.Contains, query.String("z3")).WithLimit(5),
		query.New().Where("spec.zone[*]", query.Eq, query.String("z2")).SortBy(query.Asc("metadata.labels.tier"), query.Desc("metadata.name")).WithLimit(17),
	} {
		want := walk(scan, q)
		if len(want) == 0 {
			t.Fatalf("%s: nothing matches", q)
		}
		for name, l := range map[string]*Lister{"indexed": New(indexed, gr), "compact": New(compact, gr)} {
			if got := walk(lister(l), q); !slices.Equal(got, want) {
				t.Errorf("%s %s:\n got %v\nwant %v", name, q, got, want)
			}
			var inB []string
			for _, k := range want {
				if k[:2] == "b/" {
					inB = append(inB, k)
				}
			}
			if got := walk(lister(l.Namespace("b")), q); !slices.Equal(got, inB) {
				t.Errorf("%s namespace b %s:\n got %v\nwant %v", name, q, got, inB)
			}
		}
	}
}
