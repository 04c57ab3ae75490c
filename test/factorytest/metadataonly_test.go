package factorytest

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestMetadataOnlyWithoutMetadataClient: a MetadataOnly informer of a
// factory built on a dynamic client alone (no metadata client) caches what
// the metadata client gives a NewForConfig factory's: the same
// *metav1.PartialObjectMetadata, after the initial sync and after watch
// events (an update, a create, a delete).
func TestMetadataOnlyWithoutMetadataClient(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("mdonly")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 3, func(i int) map[string]string { return map[string]string{"i": fmt.Sprint(i)} })

	leaks := controlplane.SnapshotGoroutines()
	viaMetadata := newFactory(t, cp.Config())
	viaDynamic := dynamicinformer.NewSharedInformerFactory(dynamic.NewForConfigOrDie(cp.Config()), dynamicinformer.Options{})
	md := viaMetadata.ForResource(gvr, dynamicinformer.WithNamespaces(ns), dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true}))
	dy := viaDynamic.ForResource(gvr, dynamicinformer.WithNamespaces(ns), dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true}))
	viaMetadata.Start(ctx)
	viaDynamic.Start(ctx)
	for _, f := range []*dynamicinformer.Factory{viaMetadata, viaDynamic} {
		if !f.WaitForCacheSync(ctx)[gvr] {
			t.Fatal("not synced")
		}
	}
	cache := func(h *dynamicinformer.InformerHandle) []*metav1.PartialObjectMetadata {
		var out []*metav1.PartialObjectMetadata
		for _, o := range h.Informer().GetStore().List() {
			m, ok := o.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("cache holds %T, want *metav1.PartialObjectMetadata", o)
			}
			out = append(out, m)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	same := func(what string, n int) {
		t.Helper()
		var a, b []*metav1.PartialObjectMetadata
		eventually(t, ctx, what, func() bool {
			a, b = cache(md), cache(dy)
			return len(a) == n && reflect.DeepEqual(a, b)
		})
		if a[0].Name == "" || len(a[0].ManagedFields) == 0 || a[0].UID == "" {
			t.Fatalf("%s: cached metadata incomplete: %#v", what, a[0])
		}
		t.Logf("%s: %d objects, the same both ways", what, n)
	}
	same("after the initial sync", 3)

	res := cp.Dynamic().Resource(gvr).Namespace(ns)
	u, err := res.Get(ctx, "w-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{"changed": "yes"})
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Create(ctx, obj(gvr.GroupVersion().String(), "Widget", ns, "w-new", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, "w-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	same("after an update, a create and a delete", 3)
	if a := cache(dy); a[0].Name != "w-0" || a[0].Annotations["changed"] != "yes" {
		t.Fatalf("update not seen: %#v", a[0])
	}
	viaMetadata.Shutdown()
	viaDynamic.Shutdown()
	leaks.VerifyNoLeaks(t)
}
