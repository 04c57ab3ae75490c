package dynamicinformer

import (
	"context"
	"github.com/informerkit/informerkit/genericlister"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	ikcache "github.com/informerkit/informerkit/cache"
)

// TestCompactProjection: an informer with a compact projection caches
// *cache.Compact objects through a Compactor of its own, after its
// WithTransform transform; its listers return decoded objects (kept and
// shared on the next read), and compact projections share by value.
func TestCompactProjection(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(widget("a", "w1", map[string]string{"tier": "web"}), widget("a", "w2", nil), widget("b", "w3", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	strip := 0
	plain := f.ForResource(widgets)
	compact := func(max int) ResourceOption {
		return WithProjection(Projection{Compact: true, CompactOptions: ikcache.CompactorOptions{MaxDecoded: max}})
	}
	h := f.ForResource(widgets, compact(0), WithTransform("check", func(o interface{}) (interface{}, error) {
		strip++ // runs before the Compactor: it still sees Unstructured
		if _, ok := o.(*unstructured.Unstructured); !ok {
			t.Errorf("WithTransform's transform got %T", o)
		}
		return o, nil
	}))
	other := f.ForResource(widgets, compact(10))
	if h.Informer().GetIndexer() == plain.Informer().GetIndexer() || h.Informer().GetIndexer() == other.Informer().GetIndexer() {
		t.Fatal("compact informers share with informers of other modes")
	}
	if again := f.ForResource(widgets, compact(10)); again.Informer().GetIndexer() != other.Informer().GetIndexer() {
		t.Fatal("the same compact options did not share")
	}
	f.Start(ctx)
	if synced := f.WaitForCacheSync(ctx); !synced[widgets] {
		t.Fatalf("not synced: %v", synced)
	}
	waitFor(t, func() bool { return h.Status().State == Synced })
	for _, obj := range h.Informer().GetIndexer().List() {
		if _, ok := obj.(*ikcache.Compact); !ok {
			t.Fatalf("cache holds %T", obj)
		}
	}
	if strip == 0 {
		t.Error("WithTransform's transform did not run")
	}
	g1, err := h.Lister().ByNamespace("a").Get("w1")
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := genericlister.New(h.Informer().GetIndexer(), h.GVR().GroupResource()).Namespace("a").Get("w1")
	if g1 != g2 || g2.GetLabels()["tier"] != "web" {
		t.Errorf("Get: %v, kept and shared: %v", g2, g1 == g2)
	}
	objs, err := genericlister.New(h.Informer().GetIndexer(), h.GVR().GroupResource()).List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
	if err != nil || len(objs) != 1 || objs[0] != g2 {
		t.Errorf("selector List: %v, %v", objs, err)
	}
	cancel()
	f.Shutdown()
	checkNoLeaks(t, before)
}
