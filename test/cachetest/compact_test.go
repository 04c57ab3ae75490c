package cachetest

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestCompactMode keeps objects encoded in the cache (a Compactor) and
// checks that listers and DecodingHandler still serve Unstructured objects
// equal to the server's, with label-indexed lists equal to the server's.
func TestCompactMode(t *testing.T) {
	controlplane.Parallel(t)
	f := setup(t, "compact.cachetest.example.com", 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic(), 0, f.ns, nil)
	inf := factory.ForResource(f.gvr).Informer()
	if err := inf.SetTransform(ikcache.Chain(ikcache.StripManagedFields, ikcache.NewCompactor(ikcache.CompactorOptions{}).Transform)); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(ikcache.AutoLabelKeyIndexers()); err != nil {
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

// TestCompactorReadsAfterWrites runs compact mode with a Compactor of its
// own on a real server: objects read (and so kept decoded) are updated and
// deleted through the API server, and the lister's next reads — Get and
// the namespace List — serve the
// server's new state, never the kept old version.
func TestCompactorReadsAfterWrites(t *testing.T) {
	controlplane.Parallel(t)
	f := setup(t, "compactor.cachetest.example.com", 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	compactor := ikcache.NewCompactor(ikcache.CompactorOptions{})
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic(), 0, f.ns, nil)
	inf := factory.ForResource(f.gvr).Informer()
	if err := inf.SetTransform(ikcache.Chain(ikcache.StripManagedFields, compactor.Transform)); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	lister := genericlister.New(inf.GetIndexer(), f.gvr.GroupResource())
	client := cp.Dynamic().Resource(f.gvr).Namespace(f.ns)

	// Keep everything decoded: a Get of w001, two namespace Lists.
	before, err := lister.Namespace(f.ns).Get("w001")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if objs, err := lister.Namespace(f.ns).List(labels.Everything()); err != nil || len(objs) != 20 {
			t.Fatalf("namespace List: %d objects, %v", len(objs), err)
		}
	}
	if again, _ := lister.Namespace(f.ns).Get("w001"); again != before {
		t.Error("Get of a kept object decoded it again")
	}
	if held := compactor.Stats().Held; held != 20 {
		t.Errorf("Compactor holds %d decoded objects after Get and two Lists of 20, want 20", held)
	}

	// Update w001 and w002 on the server, delete w003.
	for _, name := range []string{"w001", "w002"} {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, "changed", "spec", "field00"); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Delete(ctx, "w003", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each read compares with the server's current object.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		objs, err := lister.Namespace(f.ns).List(labels.Everything())
		if err != nil || len(objs) != 19 {
			return false, err
		}
		for _, o := range objs {
			if o.GetName() == "w001" || o.GetName() == "w002" {
				if v, _, _ := unstructured.NestedString(o.Object, "spec", "field00"); v != "changed" {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the namespace List never showed the writes: %v", err)
	}
	for _, name := range []string{"w001", "w002", "w004"} {
		got, err := lister.Namespace(f.ns).Get(name)
		if err != nil {
			t.Fatal(err)
		}
		server, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		server.SetManagedFields(nil)
		if !equalJSON(t, got, server) {
			t.Errorf("%s: lister serves\n%v\nserver has\n%v", name, got.Object, server.Object)
		}
	}
	if _, err := lister.Namespace(f.ns).Get("w003"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the deleted w003: %v", err)
	}
}
