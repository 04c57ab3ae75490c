package genericlister_test

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/internal/labelindex"
)

var deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}

func deployment(ns, name, app string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]interface{}{
			"name": name, "namespace": ns,
			"labels": map[string]interface{}{"app": app},
		},
		"spec": map[string]interface{}{"replicas": replicas},
	}}
}

// newIndexer builds what an informer holds (informer.GetIndexer()) with
// the namespace and label indexes.
func newIndexer() toolscache.Indexer {
	indexers := labelindex.LabelIndexers()
	indexers[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	_ = idx.Add(deployment("prod", "web", "web", 3))
	_ = idx.Add(deployment("prod", "db", "db", 1))
	_ = idx.Add(deployment("dev", "web", "web", 1))
	return idx
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	sort.Strings(out) // List is unordered
	return out
}

// List answers label selectors from the label index; the objects are
// shared with the cache (DeepCopy one to modify it).
func ExampleLister_List() {
	lister := genericlister.New(newIndexer(), deployments)
	sel, _ := labels.Parse("app in (web,cache)")
	all, _ := lister.List(sel)
	prod, _ := lister.Namespace("prod").List(sel)
	fmt.Println(names(all), names(prod))

	web, _ := lister.Namespace("prod").Get("web")
	d := web.DeepCopy() // a private copy
	d.SetLabels(nil)
	_, err := lister.Namespace("prod").Get("nope")
	fmt.Println(err)
	// Output:
	// [dev/web prod/web] [prod/web]
	// deployments.apps "nope" not found
}

// ByField queries by a field path; with the field index registered it is
// an index lookup, without it a scan with the same answer.
func ExampleLister_ByField() {
	idx := newIndexer()
	fi, _ := ikcache.FieldIndexers("spec.replicas")
	_ = idx.AddIndexers(fi)
	objs, _ := genericlister.New(idx, deployments).ByField("spec.replicas", "1")
	fmt.Println(names(objs))
	// Output: [dev/web prod/db]
}

// In compact mode ListCompact lists the cache's Compacts without decoding
// them: metadata and single fields are read from the compact form, and
// Shared or Decode give the whole object only where it is needed.
func ExampleLister_ListCompact() {
	compactor := ikcache.NewCompactor(ikcache.CompactorOptions{})
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, d := range []*unstructured.Unstructured{deployment("prod", "web", "web", 3), deployment("prod", "db", "db", 1)} {
		c, _ := compactor.Transform(d) // what compact informers store
		_ = idx.Add(c)
	}
	views, _ := genericlister.New(idx, deployments).Namespace("prod").ListCompact(labels.Everything())
	sort.Slice(views, func(i, j int) bool { return views[i].GetObjectMeta().GetName() < views[j].GetObjectMeta().GetName() })
	for _, v := range views {
		replicas, _, _ := v.NestedField("spec", "replicas")
		fmt.Println(v.GetObjectMeta().GetName(), v.GetObjectMeta().GetLabels()["app"], replicas)
	}
	fmt.Println("decoded objects kept:", compactor.Stats().Held)
	// Output:
	// db db 1
	// web web 3
	// decoded objects kept: 0
}
