package query_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/query"
)

func Example() {
	// An informer's indexer (informer.GetIndexer()); here filled by hand.
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for i, replicas := range []int64{3, 1, 5, 4, 2} {
		_ = indexer.Add(&unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]interface{}{
				"namespace": "prod", "name": fmt.Sprintf("web-%d", i), "resourceVersion": fmt.Sprint(10 + i),
			},
			"spec": map[string]interface{}{"replicas": replicas},
		}})
	}

	q, err := query.Parse("where=spec.replicas>1&orderBy=-spec.replicas&limit=2")
	if err != nil {
		panic(err)
	}
	for {
		// Scan filters and sorts; query.NewIndexes(informer).Query gives
		// the same pages from ordered indexes.
		page, err := query.Scan(query.FromIndexer(indexer), q)
		if err != nil {
			panic(err)
		}
		for _, obj := range page.Items {
			u := obj.(*unstructured.Unstructured)
			r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			fmt.Println(u.GetName(), r)
		}
		if page.Continue == "" {
			break
		}
		q.Continue = page.Continue
	}
	// Output:
	// web-2 5
	// web-3 4
	// web-0 3
	// web-4 2
}
