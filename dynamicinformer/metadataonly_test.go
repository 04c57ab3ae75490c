package dynamicinformer

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// metadataOf is what the metadata client hands an informer for u: the
// metadata the server puts in a PartialObjectMetadata, no TypeMeta.
func metadataOf(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := meta.AsPartialObjectMetadata(u)
	m.TypeMeta = metav1.TypeMeta{}
	return m
}

// A MetadataOnly informer of a factory with a dynamic client and no
// metadata client lists and watches through the dynamic client and caches
// *metav1.PartialObjectMetadata: the listed objects and those of later
// watch events carry their metadata and nothing else.
func TestMetadataOnlyThroughDynamicClient(t *testing.T) {
	before := runtime.NumGoroutine()
	w1 := widget("a", "w1", map[string]string{"tier": "web"})
	w1.SetAnnotations(map[string]string{"note": "x"})
	w1.Object["spec"] = map[string]interface{}{"size": int64(3)}
	client := fakeClient(w1)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets, WithProjection(Projection{MetadataOnly: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatalf("not synced: %+v", h.Status())
	}
	cached := func(key string) interface{} {
		t.Helper()
		o, ok, err := h.Informer().GetStore().GetByKey(key)
		if err != nil || !ok {
			t.Fatalf("%s not cached (%v)", key, err)
		}
		return o
	}
	if got, want := cached("a/w1"), metadataOf(w1); !reflect.DeepEqual(got, want) {
		t.Fatalf("listed object cached as %#v, want %#v", got, want)
	}

	w2 := widget("a", "w2", nil)
	w2.Object["spec"] = map[string]interface{}{"size": int64(5)}
	created, err := client.Resource(widgets).Namespace("a").Create(ctx, w2, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok, _ := h.Informer().GetStore().GetByKey("a/w2"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watched object never reached the cache")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, want := cached("a/w2"), metadataOf(created); !reflect.DeepEqual(got, want) {
		t.Fatalf("watched object cached as %#v, want %#v", got, want)
	}
	for _, o := range h.Informer().GetStore().List() {
		if _, ok := o.(*metav1.PartialObjectMetadata); !ok {
			t.Fatalf("cache holds %T, want only *metav1.PartialObjectMetadata", o)
		}
	}
	if st := h.Status(); st.State != Synced || st.Err != nil || st.Objects != 2 {
		t.Fatalf("status %+v, want Synced with 2 objects", st)
	}
	f.Shutdown()
	checkNoLeaks(t, before)
}

// The cache of a MetadataOnly informer is the same with the metadata
// client and through the dynamic client.
func TestMetadataOnlySameCacheBothWays(t *testing.T) {
	w := widget("a", "w1", map[string]string{"tier": "web"})
	w.SetResourceVersion("7")
	w.SetUID("u-1")
	w.Object["spec"] = map[string]interface{}{"size": int64(3)}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	stored := metadataOf(w)
	// The fake metadata client needs the object's apiVersion and kind and
	// hands them on; the real client clears them (its codec's convention).
	stored.TypeMeta = metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"}
	md := metadatafake.NewSimpleMetadataClient(scheme, stored)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caches := map[string][]interface{}{}
	for name, opts := range map[string]Options{"metadata client": {MetadataClient: md}, "dynamic client": {}} {
		opts.DisableCRDTracking = true
		f := NewSharedInformerFactory(fakeClient(w.DeepCopy()), opts)
		h := f.ForResource(widgets, WithProjection(Projection{MetadataOnly: true}))
		f.Start(ctx)
		if !f.WaitForCacheSync(ctx)[widgets] {
			t.Fatalf("%s: not synced: %+v", name, h.Status())
		}
		for _, o := range h.Informer().GetStore().List() {
			m := o.(*metav1.PartialObjectMetadata).DeepCopy()
			m.TypeMeta = metav1.TypeMeta{} // see above
			caches[name] = append(caches[name], m)
		}
		f.Shutdown()
	}
	if !reflect.DeepEqual(caches["metadata client"], caches["dynamic client"]) || len(caches["dynamic client"]) != 1 {
		t.Fatalf("caches differ:\nmetadata client: %#v\ndynamic client:  %#v", caches["metadata client"], caches["dynamic client"])
	}
}

// What a factory lacks is ErrInvalid, naming it: ForName without a
// resolver, a full-object informer without a dynamic client.
func TestMissingPartsAreInvalid(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	_, err := f.ForName(context.Background(), "widgets")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Options.Resolver") {
		t.Fatalf("ForName without a resolver: %v, want ErrInvalid naming Options.Resolver", err)
	}

	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	g := NewSharedInformerFactory(nil, Options{MetadataClient: md})
	defer g.Shutdown()
	st := g.ForResource(widgets).Status()
	if st.State != Failed || !errors.Is(st.Err, ErrInvalid) || !strings.Contains(st.Err.Error(), "dynamic client") {
		t.Fatalf("full objects without a dynamic client: %+v, want Failed, ErrInvalid naming the dynamic client", st)
	}
	if st := g.ForResource(widgets, WithProjection(Projection{MetadataOnly: true})).Status(); st.Err != nil {
		t.Fatalf("MetadataOnly with a metadata client and no dynamic client: %+v", st)
	}
	none := NewSharedInformerFactory(nil, Options{})
	defer none.Shutdown()
	st = none.ForResource(widgets, WithProjection(Projection{MetadataOnly: true})).Status()
	if st.State != Failed || !errors.Is(st.Err, ErrInvalid) || !strings.Contains(st.Err.Error(), "Options.MetadataClient") {
		t.Fatalf("MetadataOnly without any client: %+v, want Failed, ErrInvalid naming Options.MetadataClient", st)
	}
}
