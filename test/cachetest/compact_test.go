package cachetest

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/genericlister"
)

// TestCompactMode keeps objects encoded in the cache (CompactTransform) and
// checks that listers and DecodingHandler still serve Unstructured objects
// equal to the server's, with label-indexed lists equal to the server's.
func TestCompactMode(t *testing.T) {
	f := setup(t, "compact.cachetest.example.com", 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic(), 0, f.ns, nil)
	inf := factory.ForResource(f.gvr).Informer()
	if err := inf.SetTransform(ikcache.Chain(ikcache.StripManagedFields, ikcache.CompactTransform)); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(ikcache.LabelIndexers()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handled []interface{}
	if _, err := inf.AddEventHandler(ikcache.DecodingHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { mu.Lock(); handled = append(handled, obj); mu.Unlock() },
	})); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	for _, obj := range inf.GetIndexer().List() {
		if _, ok := obj.(*ikcache.Compact); !ok {
			t.Fatalf("cache holds %T, want *cache.Compact", obj)
		}
	}
	lister := genericlister.New(inf.GetIndexer(), f.gvr.GroupResource())
	got, err := lister.Namespace(f.ns).Get("w002")
	if err != nil {
		t.Fatal(err)
	}
	server, err := cp.Dynamic().Resource(f.gvr).Namespace(f.ns).Get(ctx, "w002", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server.SetManagedFields(nil)
	if !equalJSON(t, got, server) {
		t.Errorf("decoded compact object differs from the server's:\n%v\n%v", got.Object, server.Object)
	}
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := lister.List(sel)
		return names(objs), err
	})
	mu.Lock()
	defer mu.Unlock()
	for _, obj := range handled {
		if _, ok := obj.(*unstructured.Unstructured); !ok {
			t.Fatalf("handler received %T, want *unstructured.Unstructured", obj)
		}
	}
	if len(handled) < 30 {
		t.Errorf("handler saw %d adds, want 30", len(handled))
	}
}

func equalJSON(t *testing.T, a, b *unstructured.Unstructured) bool {
	t.Helper()
	ja, err := a.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	jb, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
