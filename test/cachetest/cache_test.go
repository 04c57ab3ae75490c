package cachetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/genericlister"
	"github.com/informerkit/informerkit/test/controlplane"
)

// selectors compared between the label-indexed lister and the server's
// own filtering; together they use every selector operator.
var selectors = []string{
	"",
	"app=web",
	"app==db",
	"app in (web,cache)",
	"app notin (web)",
	"app!=web",
	"tier",
	"!tier",
	"app=web,tier=front",
	"app in (web,db),tier!=back",
	"app=nope",
	"app,!tier",
}

type fixture struct {
	ns  string
	gvr schema.GroupVersionResource
}

// setup installs a CRD and a namespace and creates n widgets with labels,
// a 20-field spec, the kubectl last-applied annotation and (written by the
// server) one managedFields entry.
func setup(t *testing.T, group string, n int) fixture {
	t.Helper()
	ctx := context.Background()
	crd := controlplane.NewCRD(group, "Widget", "widgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	f := fixture{ns: strings.ReplaceAll(group, ".", "-"), gvr: controlplane.GVR(crd)}
	if err := cp.CreateNamespace(ctx, f.ns); err != nil {
		t.Fatal(err)
	}
	apps := []string{"web", "db", "cache"}
	client := cp.Dynamic().Resource(f.gvr).Namespace(f.ns)
	for i := 0; i < n; i++ {
		l := map[string]interface{}{"app": apps[i%3], "index": fmt.Sprint(i)}
		if i%4 != 0 {
			l["tier"] = []string{"front", "back"}[i%2]
		}
		spec := map[string]interface{}{"size": int64(i)}
		for k := 0; k < 20; k++ {
			spec[fmt.Sprintf("field%02d", k)] = fmt.Sprintf("value-%d-%d", i, k)
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": f.gvr.GroupVersion().String(),
			"kind":       "Widget",
			"metadata": map[string]interface{}{
				"name":        fmt.Sprintf("w%03d", i),
				"labels":      l,
				"annotations": map[string]interface{}{corev1.LastAppliedConfigAnnotation: `{"big":"blob"}`, "keep": "me"},
			},
			"spec": spec,
		}}
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func serverNames(t *testing.T, f fixture, selector string) []string {
	t.Helper()
	list, err := cp.Dynamic().Resource(f.gvr).Namespace(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	sort.Strings(out)
	return out
}

func names[T interface{ GetName() string }](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	sort.Strings(out)
	return out
}

// waitEqual polls until every selector gives the same names from list and
// from the server (the informer catches up asynchronously).
func waitEqual(t *testing.T, f fixture, list func(sel labels.Selector) ([]string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, s := range selectors {
			sel, err := labels.Parse(s)
			if err != nil {
				return false, err
			}
			got, err := list(sel)
			if err != nil {
				return false, err
			}
			want := serverNames(t, f, s)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				last = fmt.Sprintf("selector %q: cache %v, server %v", s, got, want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("cache never matched the server: %v; last difference: %s", err, last)
	}
}

func TestDynamicInformerTransformsAndLabelIndex(t *testing.T) {
	controlplane.Parallel(t)
	f := setup(t, "dyn.cachetest.example.com", 60)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic(), 0, f.ns, nil)
	inf := factory.ForResource(f.gvr).Informer()
	size, err := ikcache.Project("spec.size")
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.SetTransform(ikcache.Chain(
		ikcache.StripManagedFields,
		ikcache.DropLastAppliedConfiguration,
		size,
	)); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(ikcache.AutoLabelKeyIndexers()); err != nil {
		t.Fatal(err)
	}
	detector := ikcache.NewMutationDetector()
	if _, err := inf.AddEventHandler(detector.ResourceEventHandler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is cancelled.
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	// The server's objects carry what the transforms remove.
	full, err := cp.Dynamic().Resource(f.gvr).Namespace(f.ns).Get(ctx, "w001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.GetManagedFields()) == 0 || full.GetAnnotations()[corev1.LastAppliedConfigAnnotation] == "" {
		t.Fatalf("server object lacks managedFields or last-applied: %v", full.Object["metadata"])
	}

	lister := genericlister.New(inf.GetIndexer(), f.gvr.GroupResource())
	got, err := lister.Namespace(f.ns).Get("w001")
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.GetManagedFields(); mf != nil {
		t.Errorf("cached object has managedFields %v", mf)
	}
	ann := got.GetAnnotations()
	if _, ok := ann[corev1.LastAppliedConfigAnnotation]; ok || ann["keep"] != "me" {
		t.Errorf("cached annotations = %v, want only keep=me", ann)
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if len(spec) != 1 || spec["size"] != int64(1) {
		t.Errorf("cached spec = %v, want only size=1", spec)
	}
	if got.GetUID() != full.GetUID() || got.GetResourceVersion() != full.GetResourceVersion() || got.GetLabels()["app"] != "db" {
		t.Errorf("projection lost metadata: %v", got.Object["metadata"])
	}
	t.Logf("server object %d bytes of JSON, cached projection %d", jsonSize(t, full), jsonSize(t, got))

	list := func(sel labels.Selector) ([]string, error) {
		objs, err := lister.List(sel)
		return names(objs), err
	}
	waitEqual(t, f, list)
	generic := genericlister.NewGeneric(inf.GetIndexer(), f.gvr.GroupResource())
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := generic.ByNamespace(f.ns).List(sel)
		return objectNames(objs), err
	})

	// Change labels, delete some objects; the index follows.
	changeLabelsAndDelete(t, f)
	waitEqual(t, f, list)
	if err := detector.Verify(); err != nil {
		t.Error(err)
	}
}

func TestMetadataInformerGenericLister(t *testing.T) {
	controlplane.Parallel(t)
	f := setup(t, "meta.cachetest.example.com", 45)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	client, err := metadata.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, f.ns, nil)
	inf := factory.ForResource(f.gvr).Informer()
	if err := inf.SetTransform(ikcache.Chain(ikcache.StripManagedFields, ikcache.DropLastAppliedConfiguration)); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(ikcache.AutoLabelKeyIndexers()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is cancelled.
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	for _, obj := range inf.GetIndexer().List() {
		p, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("metadata informer cached %T", obj)
		}
		if p.ManagedFields != nil || p.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
			t.Fatalf("transform not applied to %s: %+v", p.Name, p.ObjectMeta)
		}
	}
	generic := genericlister.NewGeneric(inf.GetIndexer(), f.gvr.GroupResource())
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := generic.List(sel)
		return objectNames(objs), err
	})
	// As stored, as client-go's metadatalister reads it.
	typed := genericlister.NewTyped[*metav1.PartialObjectMetadata](inf.GetIndexer(), f.gvr.GroupResource())
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := typed.Namespace(f.ns).List(sel)
		return names(objs), err
	})
	// Converted to Unstructured, as asked.
	lister := genericlister.New(inf.GetIndexer(), f.gvr.GroupResource(), genericlister.ConvertToUnstructured())
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := lister.Namespace(f.ns).List(sel)
		return names(objs), err
	})
	changeLabelsAndDelete(t, f)
	waitEqual(t, f, func(sel labels.Selector) ([]string, error) {
		objs, err := generic.ByNamespace(f.ns).List(sel)
		return objectNames(objs), err
	})
}

func changeLabelsAndDelete(t *testing.T, f fixture) {
	t.Helper()
	ctx := context.Background()
	client := cp.Dynamic().Resource(f.gvr).Namespace(f.ns)
	for i := 0; i < 30; i += 3 {
		u, err := client.Get(ctx, fmt.Sprintf("w%03d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := u.GetLabels()
		l["app"] = "cache"
		delete(l, "tier")
		u.SetLabels(l)
		if _, err := client.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 30; i += 5 {
		if err := client.Delete(ctx, fmt.Sprintf("w%03d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func objectNames(objs []runtime.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.(metav1.Object).GetName())
	}
	sort.Strings(out)
	return out
}

func jsonSize(t *testing.T, u *unstructured.Unstructured) int {
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
