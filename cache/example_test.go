package cache_test

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"

	"github.com/informerkit/informerkit/genericlister"
)

func pod(name, node string, labels map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]interface{}{
			"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": "1",
			"labels": labels,
			"annotations": map[string]interface{}{
				"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Pod"}`,
			},
			"managedFields": []interface{}{map[string]interface{}{"manager": "kubectl", "operation": "Apply"}},
		},
		"spec":   map[string]interface{}{"nodeName": node, "restartPolicy": "Always"},
		"status": map[string]interface{}{"phase": "Running"},
	}}
}

// Per-key label indexes: one for "app" up front, and others added on
// demand through the AutoLabelKeyIndexers marker, by genericlister's List
// the first time a selector needs them. The answers are the same without
// any index; the indexes make them proportional to the matches.
func ExampleLabelKeyIndexers() {
	indexers := ikcache.LabelKeyIndexers("app")
	for k, v := range ikcache.AutoLabelKeyIndexers() {
		indexers[k] = v
	}
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	_ = indexer.Add(pod("web-1", "n1", map[string]interface{}{"app": "web", "tier": "front"}))
	_ = indexer.Add(pod("db-1", "n1", map[string]interface{}{"app": "db", "tier": "back"}))

	lister := genericlister.New(indexer, schema.GroupResource{Resource: "pods"})
	web, _ := lister.List(labels.SelectorFromSet(labels.Set{"app": "web"}))    // the "app" index
	back, _ := lister.List(labels.SelectorFromSet(labels.Set{"tier": "back"})) // adds the "tier" index
	fmt.Println(web[0].GetName(), back[0].GetName())
	// Output:
	// web-1 db-1
}

// Field indexes come from a field path; no IndexFunc to write.
func ExampleFieldIndexers() {
	indexers, err := ikcache.FieldIndexers("spec.nodeName")
	if err != nil {
		panic(err)
	}
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	for i, node := range []string{"n1", "n2", "n1"} {
		_ = indexer.Add(pod(fmt.Sprint("p", i), node, nil))
	}
	onN1, _ := genericlister.New(indexer, schema.GroupResource{Resource: "pods"}).ByField("spec.nodeName", "n1")
	var names []string
	for _, p := range onN1 {
		names = append(names, p.GetName())
	}
	sort.Strings(names)
	fmt.Println(names)
	// Output: [p0 p2]
}

// Transforms compose with Chain and go to SharedIndexInformer.SetTransform;
// here one is applied by hand to show what stays in the cache.
func ExampleChain() {
	phase, err := ikcache.Project("status.phase")
	if err != nil {
		panic(err)
	}
	transform := ikcache.Chain(ikcache.StripManagedFields, ikcache.DropLastAppliedConfiguration, phase)
	// informer.SetTransform(transform)
	out, _ := transform(pod("web-1", "n1", map[string]interface{}{"app": "web"}))
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	// Output: {"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"web"},"name":"web-1","namespace":"default","resourceVersion":"1","uid":"uid-web-1"},"status":{"phase":"Running"}}
}

// A test wires a MutationDetector to the cache and asserts that nothing
// changed cached objects.
func ExampleMutationDetector() {
	detector := ikcache.NewMutationDetector()
	indexer := detector.WrapIndexer(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, nil))
	// With an informer: informer.AddEventHandler(detector.ResourceEventHandler())
	_ = indexer.Add(pod("web-1", "n1", nil))

	obj, _, _ := indexer.GetByKey("default/web-1")
	obj.(*unstructured.Unstructured).SetLabels(map[string]string{"oops": "mutated"}) // a bug

	fmt.Println(detector.Verify())
	// Output: cached object mutated: [*unstructured.Unstructured "default/web-1"]
}

// Compact mode with one Compactor per informer: the cache holds *Compact
// objects; reads return decoded objects, which a Get keeps so that the
// next Get of the same object is a pointer load.
func ExampleCompactor() {
	compactor := ikcache.NewCompactor(ikcache.CompactorOptions{})
	transform := ikcache.Chain(ikcache.StripManagedFields, compactor.Transform)
	// informer.SetTransform(transform); here, the indexer alone:
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	obj, _ := transform(pod("web-1", "n1", map[string]interface{}{"app": "web"}))
	_ = indexer.Add(obj)

	cached, _, _ := indexer.GetByKey("default/web-1")
	c := cached.(*ikcache.Compact)
	first, _ := c.Shared() // genericlister's Get reads this way
	again, _ := c.Shared()
	fmt.Println(first.GetName(), first.Object["spec"].(map[string]interface{})["nodeName"], first == again)
	fmt.Println(compactor.Stats().Held)
	// Output:
	// web-1 n1 true
	// 1
}

// A Compact reads fields from its encoding without decoding the object:
// metadata through GetObjectMeta, anything else with NestedField.
func ExampleCompact_NestedField() {
	c, err := ikcache.NewCompact(pod("web-0", "node-a", map[string]interface{}{"app": "web"}))
	if err != nil {
		panic(err)
	}
	node, found, err := c.NestedField("spec", "nodeName")
	fmt.Println(node, found, err)
	_, found, err = c.NestedField("spec", "missing")
	fmt.Println(found, err)
	_, _, err = c.NestedField("spec", "nodeName", "deeper")
	fmt.Println(err)
	fmt.Println(c.GetObjectMeta().GetName(), c.GetObjectMeta().GetLabels()["app"], len(c.GetObjectMeta().GetManagedFields()))
	// Output:
	// node-a true <nil>
	// false <nil>
	// .spec.nodeName.deeper accessor error: node-a is of the type string, expected map[string]interface{}
	// web-0 web 1
}
