package factorytest

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// decodedStore is a compact informer's store as readers see it: List
// returns each *cache.Compact decoded (a fresh *unstructured.Unstructured),
// and fails the test on any other type.
type decodedStore struct {
	toolscache.Store
	t *testing.T
}

func (s decodedStore) List() []interface{} {
	objs := s.Store.List()
	out := make([]interface{}, 0, len(objs))
	for _, o := range objs {
		c, ok := o.(*ikcache.Compact)
		if !ok {
			s.t.Errorf("compact store holds %T", o)
			continue
		}
		u, err := c.Decode()
		if err != nil {
			s.t.Errorf("Decode of %s/%s: %v", c.GetNamespace(), c.GetName(), err)
			continue
		}
		out = append(out, u)
	}
	return out
}

// TestCompactDecodingSameAsClientGo: WithCompact informers of a
// NewForConfig factory, whose objects are decoded straight from the JSON
// to the compact encoding, hold objects that decode reflect.DeepEqual to
// client-go's dynamic informer's, over a custom resource and ConfigMaps,
// after the initial sync and after creates, updates and deletes: for all
// namespaces, for two namespaces (a merged list and watch), with
// StripManagedFields (skipped while decoding), with a Compactor's
// Transform given as WithTransform (recognised, decoded straight too) and
// with an opaque transform (decoded to maps, then compacted) for
// comparison.
func TestCompactDecodingSameAsClientGo(t *testing.T) {
	ctx := ctxT(t, 4*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns, ns2 := unique("compact"), unique("compact")
	for _, n := range []string{ns, ns2} {
		if err := cp.CreateNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	apiVersion := gvr.GroupVersion().String()
	for i := 0; i < 30; i++ {
		applyObject(t, ctx, gvr, decodingObject(apiVersion, []string{ns, ns2}[i%2], fmt.Sprintf("w-%d", i), i))
	}
	kube := cp.Kube()
	for i := 0; i < 20; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: []string{ns, ns2}[i%2],
			Labels:      map[string]string{"i": fmt.Sprint(i)},
			Annotations: map[string]string{ikcache.LastAppliedConfigAnnotation: `{"kind":"ConfigMap"}`}},
			Data: map[string]string{"k": fmt.Sprintf("v-%d \u00e9 \"\\", i)}, BinaryData: map[string][]byte{"b": {0, 1, 2, 255}}}
		if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	leaks := controlplane.SnapshotGoroutines()
	ik := newFactory(t, cp.Config())
	theirs := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	theirsStripped := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	stop := make(chan struct{})
	compact := dynamicinformer.WithCompact(ikcache.CompactorOptions{})
	type variant struct {
		name     string
		opts     []dynamicinformer.ResourceOption
		stripped bool
	}
	variants := []variant{
		{"all", []dynamicinformer.ResourceOption{compact}, false},
		{"two-namespaces", []dynamicinformer.ResourceOption{compact, dynamicinformer.WithNamespaces(ns, ns2)}, false},
		{"strip-managed-fields", []dynamicinformer.ResourceOption{compact, dynamicinformer.WithTransform(ikcache.StripManagedFields)}, true},
		{"opaque-transform", []dynamicinformer.ResourceOption{compact, dynamicinformer.WithTransform(ikcache.Chain(ikcache.InternKeys))}, false},
		{"compactor-transform", []dynamicinformer.ResourceOption{dynamicinformer.WithTransform(ikcache.NewCompactor(ikcache.CompactorOptions{}).Transform)}, false},
	}
	type group struct {
		gvr    schema.GroupVersionResource
		ns     string
		name   string
		stores map[string]toolscache.Store
	}
	var groups []group
	for _, r := range []schema.GroupVersionResource{gvr, configmaps} {
		ref := theirs.ForResource(r).Informer()
		refStripped := theirsStripped.ForResource(r).Informer()
		if err := refStripped.SetTransform(ikcache.StripManagedFields); err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			reference := ref.GetStore()
			if v.stripped {
				reference = refStripped.GetStore()
			}
			for _, n := range []string{ns, ns2} {
				groups = append(groups, group{gvr: r, ns: n, name: r.Resource + "/" + v.name + "/" + n, stores: map[string]toolscache.Store{
					"client-go": reference,
					"compact":   decodedStore{Store: ik.ForResource(r, v.opts...).Informer().GetStore(), t: t},
				}})
			}
		}
	}
	ik.Start(ctx)
	theirs.Start(stop)
	theirsStripped.Start(stop)
	for _, g := range groups {
		sameContents(t, ctx, g.name+" after sync", g.gvr, g.ns, g.stores)
	}
	// The compact stores hold the objects (not equal merely for being
	// empty), managedFields only where not stripped.
	for _, g := range groups {
		n := 0
		for _, o := range g.stores["compact"].List() {
			u := o.(*unstructured.Unstructured)
			if u.GetNamespace() != g.ns {
				continue
			}
			n++
			_, hasMF := u.Object["metadata"].(map[string]interface{})["managedFields"]
			if want := !(g.name == g.gvr.Resource+"/strip-managed-fields/"+g.ns); hasMF != want {
				t.Fatalf("%s: %s has managedFields %v, want %v", g.name, u.GetName(), hasMF, want)
			}
		}
		if n < 10 {
			t.Fatalf("%s: %d objects in the namespace", g.name, n)
		}
	}

	// Creates, updates (spec and metadata), deletes.
	for i := 30; i < 36; i++ {
		applyObject(t, ctx, gvr, decodingObject(apiVersion, []string{ns, ns2}[i%2], fmt.Sprintf("w-%d", i), i))
	}
	for i := 0; i < 10; i++ {
		o := decodingObject(apiVersion, []string{ns, ns2}[i%2], fmt.Sprintf("w-%d", i), i+100)
		o["spec"].(map[string]interface{})["added"] = map[string]interface{}{"x": []interface{}{1.25, "y"}}
		applyObject(t, ctx, gvr, o)
	}
	for i := 10; i < 16; i++ {
		if err := cp.Dynamic().Resource(gvr).Namespace([]string{ns, ns2}[i%2]).Delete(ctx, fmt.Sprintf("w-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		patch := []byte(fmt.Sprintf(`{"data":{"k2":"\u2603 %d"},"metadata":{"labels":{"changed":"yes"}}}`, i))
		if _, err := kube.CoreV1().ConfigMaps([]string{ns, ns2}[i%2]).Patch(ctx, fmt.Sprintf("cm-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 6; i < 10; i++ {
		if err := kube.CoreV1().ConfigMaps([]string{ns, ns2}[i%2]).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		sameContents(t, ctx, g.name+" after writes", g.gvr, g.ns, g.stores)
	}
	ik.Shutdown()
	close(stop)
	theirs.Shutdown()
	theirsStripped.Shutdown()
	leaks.VerifyNoLeaks(t)
}
