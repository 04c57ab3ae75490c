package query_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/query"
)

// TestFactoryInformers: on a factory's informers (plain and compact),
// query.Indexes over InformerHandle.Informer() and genericlister's
// Lister.Query page through the same answers, before and after writes.
func TestFactoryInformers(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(i int, replicas int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"namespace": fmt.Sprintf("ns%d", i%3), "name": fmt.Sprintf("w%03d", i),
				"labels": map[string]interface{}{"app": fmt.Sprintf("a%d", i%4)}},
			"spec": map[string]interface{}{"replicas": replicas, "ports": []interface{}{int64(80), int64(8000 + i%5)}},
		}}
	}
	var objs []runtime.Object
	for i := 0; i < 150; i++ {
		objs = append(objs, widget(i, int64(i%6)))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "WidgetList"}, objs...)
	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer factory.Shutdown()
	plain := factory.ForResource(gvr)
	defer plain.Release()
	compact := factory.ForResource(gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true}))
	defer compact.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx)
	factory.WaitForCacheSync(ctx)

	q := query.New().WithLabels("app!=a1").Where("spec.ports", query.Contains, query.Int(8002)).
		SortBy(query.Desc("spec.replicas"), query.Asc("metadata.name")).WithLimit(4).WithCount()
	type reader struct {
		name string
		run  func(query.Query) ([]string, string, error)
	}
	var readers []reader
	for name, h := range map[string]*dynamicinformer.InformerHandle{"plain": plain, "compact": compact} {
		x := query.NewIndexes(h.Informer())
		defer x.Close()
		if err := x.Declare(q.OrderBy...); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, reader{name + " indexes", func(q query.Query) ([]string, string, error) {
			p, err := x.Query(q)
			if err != nil {
				return nil, "", err
			}
			var keys []string
			for _, o := range p.Items {
				k, _ := toolscache.MetaNamespaceKeyFunc(o)
				keys = append(keys, k)
			}
			return keys, p.Continue, nil
		}})
		l := genericlister.New(h.Informer().GetIndexer(), gvr.GroupResource())
		readers = append(readers, reader{name + " lister", func(q query.Query) ([]string, string, error) {
			p, err := l.Query(q)
			if err != nil {
				return nil, "", err
			}
			var keys []string
			for _, u := range p.Items {
				keys = append(keys, u.GetNamespace()+"/"+u.GetName())
			}
			return keys, p.Continue, nil
		}})
	}
	walk := func(r reader) []string {
		var out []string
		q := q
		for {
			keys, next, err := r.run(q)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			out = append(out, keys...)
			if next == "" {
				return out
			}
			q.Continue = next
		}
	}
	check := func(when string) {
		want := walk(readers[0])
		if len(want) == 0 {
			t.Fatalf("%s: nothing matches", when)
		}
		for _, r := range readers[1:] {
			if got := walk(r); !slices.Equal(got, want) {
				t.Fatalf("%s, %s:\n got %v\nwant %v\n (%s)", when, r.name, got, want, readers[0].name)
			}
		}
	}
	// Before and after the indexes have caught up, the same answer.
	check("at start")
	for i := 0; i < 150; i += 7 {
		u := widget(i, 9)
		if _, err := client.Resource(gvr).Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every cache shows the last write, then compare. In q's
	// order: each order's index follows the informer through a handler
	// of its own, so another order's index having seen the write says
	// nothing of q's (found with -cover, which slows the handlers).
	last := widget(147, 9)
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, r := range readers {
			keys, _, err := r.run(query.New().Where("metadata.name", query.Eq, query.String(last.GetName())).Where("spec.replicas", query.Eq, query.Int(9)).
				SortBy(query.Desc("spec.replicas"), query.Asc("metadata.name")))
			if err != nil || len(keys) != 1 {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("after updates")
}
