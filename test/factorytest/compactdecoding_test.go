package factorytest

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	gvr, ns, ns2 := seedDecoding(t, ctx, "compact")
	createConfigMaps(t, ctx, 20, func(i int) *corev1.ConfigMap {
		cm := decodingConfigMap([]string{ns, ns2}[i%2], i)
		cm.Labels = map[string]string{"i": fmt.Sprint(i)}
		cm.Data["k"] += ` "\`
		return cm
	})

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
	var groups []storeGroup
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
				groups = append(groups, storeGroup{gvr: r, ns: n, name: r.Resource + "/" + v.name + "/" + n, stores: map[string]toolscache.Store{
					"client-go": reference,
					"compact":   decodedStore{Store: ik.ForResource(r, v.opts...).Informer().GetStore(), t: t},
				}})
			}
		}
	}
	ik.Start(ctx)
	theirs.Start(stop)
	theirsStripped.Start(stop)
	sameContentsAll(t, ctx, "after sync", groups)
	// The compact stores hold the objects (not equal merely for being
	// empty), managedFields only where not stripped.
	for _, g := range groups {
		if n := checkManagedFields(t, g, "compact", g.name == g.gvr.Resource+"/strip-managed-fields/"+g.ns); n < 10 {
			t.Fatalf("%s: %d objects in the namespace", g.name, n)
		}
	}

	// Creates, updates (spec and metadata), deletes.
	writeDecodingObjects(t, ctx, gvr, ns, ns2)
	writeConfigMaps(t, ctx, []string{ns, ns2}, 6, 10)
	sameContentsAll(t, ctx, "after writes", groups)
	ik.Shutdown()
	close(stop)
	theirs.Shutdown()
	theirsStripped.Shutdown()
	leaks.VerifyNoLeaks(t)
}
