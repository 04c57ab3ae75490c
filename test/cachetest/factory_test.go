package cachetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/internal/labelindex"
	"github.com/informerkit/informerkit/test/controlplane"
)

// lastSeen records, per object name, the last object a handler received
// (from OnAdd or OnUpdate) and its Go type.
type lastSeen struct {
	mu   sync.Mutex
	objs map[string]interface{}
}

func newLastSeen() *lastSeen { return &lastSeen{objs: map[string]interface{}{}} }

func (s *lastSeen) record(obj interface{}) {
	m, err := apimeta.Accessor(obj) // *cache.Compact is a metav1.ObjectMetaAccessor
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[m.GetName()] = obj
}

func (s *lastSeen) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.record,
		UpdateFunc: func(_, obj interface{}) { s.record(obj) },
	}
}

func (s *lastSeen) snapshot() map[string]interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]interface{}, len(s.objs))
	for k, v := range s.objs {
		out[k] = v
	}
	return out
}

// TestFactoryReducedObjects is issue 8's integration test on informerkit's
// own factory (dynamicinformer.NewForConfig): three informers of one
// resource — transforms with a projection, metadata-only with transforms,
// compact mode — return the reduced objects from listers and to handlers,
// keep the label index, and answer label selectors as the server does,
// before and after label changes and deletes. Nothing informerkit started
// is left running after Shutdown.
func TestFactoryReducedObjects(t *testing.T) {
	controlplane.Parallel(t)
	f := setup(t, "factory.cachetest.example.com", 45)
	before := controlplane.SnapshotGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fac, err := dynamicinformer.NewForConfig(cp.Config(), dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(f.ns)}})
	if err != nil {
		t.Fatal(err)
	}
	shutdown := sync.OnceFunc(fac.Shutdown)
	defer shutdown()

	projected := fac.ForResource(f.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{
		StripManagedFields: true, DropLastApplied: true, Fields: "spec.size"}))
	meta := fac.ForResource(f.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{
		MetadataOnly: true, StripManagedFields: true, DropLastApplied: true}))
	compact := fac.ForResource(f.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, Compact: true}))
	if projected.Informer().GetIndexer() == compact.Informer().GetIndexer() || projected.Informer().GetIndexer() == meta.Informer().GetIndexer() {
		t.Fatal("differently configured informers are shared")
	}

	seen := map[string]*lastSeen{"projected": newLastSeen(), "meta": newLastSeen(), "compact-raw": newLastSeen(), "compact-decoded": newLastSeen()}
	for name, reg := range map[string]struct {
		h   *dynamicinformer.InformerHandle
		hnd toolscache.ResourceEventHandler
	}{
		"projected":       {projected, seen["projected"].handler()},
		"meta":            {meta, seen["meta"].handler()},
		"compact-raw":     {compact, seen["compact-raw"].handler()},
		"compact-decoded": {compact, ikcache.DecodingHandler(seen["compact-decoded"].handler())},
	} {
		if _, err := reg.h.Informer().AddEventHandler(reg.hnd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	fac.Start(ctx)
	for gvr, ok := range fac.WaitForCacheSync(ctx) {
		if !ok {
			t.Fatalf("%s did not sync", gvr)
		}
	}
	for name, h := range map[string]*dynamicinformer.InformerHandle{"projected": projected, "meta": meta, "compact": compact} {
		st := h.Status()
		if st.State != dynamicinformer.Synced || st.Err != nil || st.Objects != 45 {
			t.Errorf("%s: status %+v, want Synced with 45 objects", name, st)
		}
		if !ikcache.HasIndex(h.Informer().GetIndexer(), labelindex.AutoLabelKeyIndex) {
			t.Errorf("%s: the factory did not install on-demand label indexing", name)
		}
	}
	if !meta.Status().MetadataOnly {
		t.Error("metadata-only informer's status does not say MetadataOnly")
	}

	server, err := cp.Dynamic().Resource(f.gvr).Namespace(f.ns).Get(ctx, "w001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(server.GetManagedFields()) == 0 || server.GetAnnotations()[corev1.LastAppliedConfigAnnotation] == "" {
		t.Fatalf("server object lacks managedFields or last-applied: %v", server.Object["metadata"])
	}

	// What the caches and the handlers hold.
	checkProjected := func(where string, obj interface{}) {
		t.Helper()
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("%s: %T, want *unstructured.Unstructured", where, obj)
		}
		ann := u.GetAnnotations()
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		_, hasLastApplied := ann[corev1.LastAppliedConfigAnnotation]
		if u.GetManagedFields() != nil || hasLastApplied || ann["keep"] != "me" || len(spec) != 1 || spec["size"] == nil {
			t.Errorf("%s: %s not reduced: metadata %v, spec %v", where, u.GetName(), u.Object["metadata"], spec)
		}
	}
	checkMeta := func(where string, obj interface{}) {
		t.Helper()
		p, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("%s: %T, want *metav1.PartialObjectMetadata", where, obj)
		}
		_, hasLastApplied := p.Annotations[corev1.LastAppliedConfigAnnotation]
		if p.ManagedFields != nil || hasLastApplied || p.Annotations["keep"] != "me" || p.Labels["app"] == "" {
			t.Errorf("%s: %s not reduced: %+v", where, p.Name, p.ObjectMeta)
		}
	}
	checkDecoded := func(where string, obj interface{}) {
		t.Helper()
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("%s: %T, want *unstructured.Unstructured", where, obj)
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if u.GetManagedFields() != nil || len(spec) != 21 || u.GetLabels()["app"] == "" {
			t.Errorf("%s: %s: managedFields %v, %d spec fields (want none and 21)", where, u.GetName(), u.GetManagedFields(), len(spec))
		}
	}
	for _, obj := range projected.Informer().GetIndexer().List() {
		checkProjected("projected cache", obj)
	}
	for _, obj := range meta.Informer().GetIndexer().List() {
		checkMeta("metadata-only cache", obj)
	}
	for _, obj := range compact.Informer().GetIndexer().List() {
		if _, ok := obj.(*ikcache.Compact); !ok {
			t.Fatalf("compact cache holds %T, want *cache.Compact", obj)
		}
	}
	got, err := genericlister.New(projected.Informer().GetIndexer(), projected.GVR().GroupResource()).Namespace(f.ns).Get("w001")
	if err != nil {
		t.Fatal(err)
	}
	checkProjected("projected lister", got)
	if got.GetUID() != server.GetUID() || got.GetResourceVersion() != server.GetResourceVersion() || got.GetLabels()["app"] != "db" {
		t.Errorf("projection lost metadata: %v", got.Object["metadata"])
	}
	// A metadata-only handle's lister reads the cached metadata (converted
	// to Unstructured by genericlister, as asked).
	if m, err := genericlister.New(meta.Informer().GetIndexer(), meta.GVR().GroupResource(), genericlister.ConvertToUnstructured()).Namespace(f.ns).Get("w001"); err != nil || m.GetUID() != server.GetUID() || m.Object["spec"] != nil {
		t.Errorf("metadata-only lister Get: %v, %v", m, err)
	}
	mobj, err := meta.Lister().ByNamespace(f.ns).Get("w001")
	if err != nil {
		t.Fatal(err)
	}
	checkMeta("metadata-only lister", mobj)
	decoded, err := genericlister.New(compact.Informer().GetIndexer(), compact.GVR().GroupResource()).Namespace(f.ns).Get("w001")
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded("compact lister", decoded)
	if fmt.Sprint(decoded.Object["spec"]) != fmt.Sprint(server.Object["spec"]) || decoded.GetResourceVersion() != server.GetResourceVersion() {
		t.Errorf("compact lister's object differs from the server's: spec %v vs %v", decoded.Object["spec"], server.Object["spec"])
	}

	// Label selectors, through each informer's lister, equal the server's.
	listers := map[string]func(labels.Selector) ([]string, error){
		"projected": func(sel labels.Selector) ([]string, error) {
			objs, err := genericlister.New(projected.Informer().GetIndexer(), projected.GVR().GroupResource()).Namespace(f.ns).List(sel)
			return names(objs), err
		},
		"meta": func(sel labels.Selector) ([]string, error) {
			objs, err := meta.Lister().ByNamespace(f.ns).List(sel)
			return objectNames(objs), err
		},
		"compact": func(sel labels.Selector) ([]string, error) {
			objs, err := genericlister.New(compact.Informer().GetIndexer(), compact.GVR().GroupResource()).List(sel)
			return names(objs), err
		},
	}
	for _, l := range listers {
		waitEqual(t, f, l)
	}
	// The selector Lists added per-key indexes on demand, and the lists
	// after the label changes below are answered from them.
	for name, h := range map[string]*dynamicinformer.InformerHandle{"projected": projected, "meta": meta, "compact": compact} {
		for _, key := range []string{"app", "tier"} {
			if !ikcache.HasIndex(h.Informer().GetIndexer(), labelindex.LabelKeyIndexName(key)) {
				t.Errorf("%s: no per-key index for %q after selector Lists", name, key)
			}
		}
	}

	// Label changes and deletes reach the index and the handlers.
	changeLabelsAndDelete(t, f)
	for _, l := range listers {
		waitEqual(t, f, l)
	}
	relabeled := "w003" // changeLabelsAndDelete sets app=cache on w000, w003, ...
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, s := range seen {
			obj, ok := s.snapshot()[relabeled]
			if !ok {
				return false, nil
			}
			if m, err := apimeta.Accessor(obj); err != nil || m.GetLabels()["app"] != "cache" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("handlers did not all receive the relabeled %s: %v", relabeled, err)
	}
	for name, s := range seen {
		objs := s.snapshot()
		if len(objs) != 45 {
			t.Errorf("%s handler saw %d objects, want 45", name, len(objs))
		}
		for _, obj := range objs {
			switch name {
			case "projected":
				checkProjected("projected handler", obj)
			case "meta":
				checkMeta("metadata-only handler", obj)
			case "compact-raw":
				if _, ok := obj.(*ikcache.Compact); !ok {
					t.Fatalf("compact handler got %T, want *cache.Compact", obj)
				}
			case "compact-decoded":
				checkDecoded("DecodingHandler", obj)
			}
		}
	}

	cancel()
	shutdown()
	before.VerifyNoLeaks(t)
}
