package factorytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// decodingObject is a custom object with what decoders disagree on:
// integers and floats, big numbers, unicode and escapes, nulls, nested
// lists, an empty map, and the last-applied annotation.
func decodingObject(apiVersion, ns, name string, i int) map[string]interface{} {
	lastApplied, _ := json.Marshal(map[string]interface{}{"apiVersion": apiVersion, "kind": "Widget", "metadata": map[string]interface{}{"name": name}})
	return map[string]interface{}{
		"apiVersion": apiVersion, "kind": "Widget",
		"metadata": map[string]interface{}{
			"name": name, "namespace": ns,
			"labels":      map[string]interface{}{"i": fmt.Sprint(i), "app": "decode"},
			"annotations": map[string]interface{}{corev1.LastAppliedConfigAnnotation: string(lastApplied), "note": "caf\u00e9 \u2603 \U0001F680 \"q\" \\ \n"},
		},
		"spec": map[string]interface{}{
			"count": int64(i), "big": int64(9007199254740993), "neg": int64(-42), "ratio": 0.1 * float64(i+1), "exp": 1.5e300,
			"flag": i%2 == 0, "nothing": nil, "empty": map[string]interface{}{}, "emptyList": []interface{}{},
			"nested": []interface{}{[]interface{}{int64(1), "two", 3.25}, map[string]interface{}{"k": []interface{}{nil, true}}},
		},
	}
}

// applyObject writes obj with server-side apply, so the server adds
// managedFields as it does for controllers and kubectl.
func applyObject(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, obj map[string]interface{}) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]interface{})
	force := true
	if _, err := cp.Dynamic().Resource(gvr).Namespace(md["namespace"].(string)).Patch(ctx, md["name"].(string), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "decoding-test", Force: &force}); err != nil {
		t.Fatal(err)
	}
}

// storeContents maps each object of a store by namespace/name.
func storeContents(objs []interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for _, o := range objs {
		m := o.(metav1.Object)
		out[m.GetNamespace()+"/"+m.GetName()] = o
	}
	return out
}

// sameContents waits until the stores hold the server's objects and
// equal contents (reflect.DeepEqual object by object), and fails if they
// do not within the bound.
func sameContents(t *testing.T, ctx context.Context, what string, gvr schema.GroupVersionResource, ns string, stores map[string]toolscache.Store) {
	t.Helper()
	var diff string
	err := waitFor(ctx, 2*time.Minute, func() bool {
		server := serverKeys(t, ctx, gvr, ns, metav1.ListOptions{})
		var ref map[string]interface{}
		var refName string
		names := make([]string, 0, len(stores))
		for name := range stores {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			objs := stores[name].List()
			var inNS []interface{}
			for _, o := range objs {
				if o.(metav1.Object).GetNamespace() == ns {
					inNS = append(inNS, o)
				}
			}
			if keys := keysOf(inNS); !reflect.DeepEqual(keys, server) {
				diff = fmt.Sprintf("%s holds %d objects, the server %d (or other resourceVersions)", name, len(keys), len(server))
				return false
			}
			c := storeContents(inNS)
			if ref == nil {
				ref, refName = c, name
				continue
			}
			for k, want := range ref {
				if !reflect.DeepEqual(c[k], want) {
					diff = fmt.Sprintf("%s: %s differs from %s's:\n%#v\n%#v", k, name, refName, c[k], want)
					return false
				}
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%s: %s", what, diff)
	}
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// seedDecoding installs a custom resource, creates two namespaces named
// after prefix and applies 30 decodingObjects to them, alternately.
func seedDecoding(t *testing.T, ctx context.Context, prefix string) (gvr schema.GroupVersionResource, ns, ns2 string) {
	t.Helper()
	gvr, _ = installCRD(t, ctx)
	ns, ns2 = unique(prefix), unique(prefix)
	for _, n := range []string{ns, ns2} {
		if err := cp.CreateNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		applyObject(t, ctx, gvr, decodingObject(gvr.GroupVersion().String(), []string{ns, ns2}[i%2], fmt.Sprintf("w-%d", i), i))
	}
	return gvr, ns, ns2
}

// decodingConfigMap is ConfigMap cm-i in ns, with the last-applied
// annotation, non-ASCII data and binary data.
func decodingConfigMap(ns string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns,
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"kind":"ConfigMap"}`}},
		Data: map[string]string{"k": fmt.Sprintf("v-%d \u00e9", i)}, BinaryData: map[string][]byte{"b": {0, 1, 2, 255}}}
}

// createConfigMaps creates n ConfigMaps: cm(i) for i below n.
func createConfigMaps(t *testing.T, ctx context.Context, n int, cm func(i int) *corev1.ConfigMap) {
	t.Helper()
	for i := 0; i < n; i++ {
		c := cm(i)
		if _, err := cp.Kube().CoreV1().ConfigMaps(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// writeDecodingObjects changes the objects seedDecoding applied: creates
// w-30 to w-35, updates w-0 to w-9 (spec and metadata), deletes w-10 to
// w-15.
func writeDecodingObjects(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, ns2 string) {
	t.Helper()
	apiVersion := gvr.GroupVersion().String()
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
}

// writeConfigMaps merge-patches cm-i (data and labels) for i below patched
// and deletes it for i from patched below deleted, in namespaces[i%len].
func writeConfigMaps(t *testing.T, ctx context.Context, namespaces []string, patched, deleted int) {
	t.Helper()
	kube := cp.Kube()
	for i := 0; i < patched; i++ {
		patch := []byte(fmt.Sprintf(`{"data":{"k2":"\u2603 %d"},"metadata":{"labels":{"changed":"yes"}}}`, i))
		if _, err := kube.CoreV1().ConfigMaps(namespaces[i%len(namespaces)]).Patch(ctx, fmt.Sprintf("cm-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := patched; i < deleted; i++ {
		if err := kube.CoreV1().ConfigMaps(namespaces[i%len(namespaces)]).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// storeGroup is stores that must hold equal objects of one resource in
// one namespace.
type storeGroup struct {
	gvr    schema.GroupVersionResource
	ns     string
	name   string
	stores map[string]toolscache.Store
}

// sameContentsAll is sameContents over every group.
func sameContentsAll(t *testing.T, ctx context.Context, when string, groups []storeGroup) {
	t.Helper()
	for _, g := range groups {
		sameContents(t, ctx, g.name+" "+when, g.gvr, g.ns, g.stores)
	}
}

// checkManagedFields fails unless each object of g's namespace in
// g.stores[store] has managedFields exactly when not stripped, and
// returns how many there are.
func checkManagedFields(t *testing.T, g storeGroup, store string, stripped bool) (objects int) {
	t.Helper()
	for _, o := range g.stores[store].List() {
		u := o.(*unstructured.Unstructured)
		if u.GetNamespace() != g.ns { // other tests' objects
			continue
		}
		objects++
		_, hasMF := u.Object["metadata"].(map[string]interface{})["managedFields"]
		if want := !stripped; hasMF != want {
			t.Fatalf("%s: %s has managedFields %v, want %v", g.name, u.GetName(), hasMF, want)
		}
	}
	return objects
}

// TestFastDecodingSameAsClientGo: informers on informerkit's decode path
// (the default of NewForConfig) and on client-go's (Options.APIMachineryDecoding,
// and client-go's own dynamic informer) over the same custom resource and
// the same built-in kind hold reflect.DeepEqual objects after the initial
// sync and after creates, updates and deletes; with StripManagedFields or
// DropLastAppliedConfiguration (skipped while decoding on the fast path)
// too, alone and in a cache.Chain; for one namespace, all namespaces and several namespaces (a merged,
// paginated list and watch).
func TestFastDecodingSameAsClientGo(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	gvr, ns, ns2 := seedDecoding(t, ctx, "decode")
	createConfigMaps(t, ctx, 20, func(i int) *corev1.ConfigMap { return decodingConfigMap(ns, i) })

	leaks := controlplane.SnapshotGoroutines()
	fast := newFactory(t, cp.Config())
	slow := newFactory(t, cp.Config(), dynamicinformer.Options{APIMachineryDecoding: true})
	theirs := cgdynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic(), 0)
	stop := make(chan struct{})
	type variant struct {
		name string
		opts []dynamicinformer.ResourceOption
	}
	variants := []variant{
		{"all", nil},
		{"one-namespace", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(ns)}},
		{"two-namespaces", []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(ns, ns2)}},
		{"strip-managed-fields", []dynamicinformer.ResourceOption{dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true})}},
		{"drop-last-applied", []dynamicinformer.ResourceOption{dynamicinformer.WithProjection(dynamicinformer.Projection{DropLastApplied: true})}},
		{"chain-strip-both", []dynamicinformer.ResourceOption{dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, DropLastApplied: true}),
			dynamicinformer.WithTransform("intern", ikcache.InternKeys)}},
	}
	var groups []storeGroup
	for _, r := range []schema.GroupVersionResource{gvr, configmaps} {
		for _, v := range variants {
			g := storeGroup{gvr: r, ns: ns, name: r.Resource + "/" + v.name, stores: map[string]toolscache.Store{}}
			g.stores["fast"] = fast.ForResource(r, v.opts...).Informer().GetStore()
			g.stores["apimachinery"] = slow.ForResource(r, v.opts...).Informer().GetStore()
			if v.name == "all" {
				g.stores["client-go"] = theirs.ForResource(r).Informer().GetStore()
			}
			groups = append(groups, g)
			if v.name == "two-namespaces" || v.name == "all" {
				g2 := g
				g2.ns, g2.name = ns2, g.name+"/"+ns2
				groups = append(groups, g2)
			}
		}
	}
	fast.Start(ctx)
	slow.Start(ctx)
	theirs.Start(stop)
	sameContentsAll(t, ctx, "after sync", groups)
	// The fast path really skipped what the transforms remove (and the
	// stores are not equal merely because both are empty of it).
	for _, g := range groups {
		checkManagedFields(t, g, "fast", strings.HasSuffix(g.name, "/strip-managed-fields") || strings.HasSuffix(g.name, "/chain-strip-both"))
	}

	// Creates, updates (spec and metadata), deletes.
	writeDecodingObjects(t, ctx, gvr, ns, ns2)
	writeConfigMaps(t, ctx, []string{ns}, 5, 8)
	sameContentsAll(t, ctx, "after writes", groups)
	fast.Shutdown()
	slow.Shutdown()
	close(stop)
	theirs.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestFastDecodingForbiddenSameError: a list the server forbids gives the
// informer the same typed error on both decode paths (ErrForbidden
// wrapping the server's 403 Status, field for field).
func TestFastDecodingForbiddenSameError(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	ns := unique("decode-forbidden")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg := cp.UserConfig(unique("nobody"))
	errs := map[string]*apierrors.StatusError{}
	for name, opts := range map[string]dynamicinformer.Options{"fast": {}, "apimachinery": {APIMachineryDecoding: true}} {
		f := newFactory(t, cfg, opts)
		h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
		f.Start(ctx)
		eventually(t, ctx, name+" forbidden", func() bool { return h.Status().State == dynamicinformer.Failed })
		st := h.Status()
		var ie *dynamicinformer.InformerError
		var se *apierrors.StatusError
		if !errors.Is(st.Err, dynamicinformer.ErrForbidden) || !errors.As(st.Err, &ie) || !errors.As(ie.Err, &se) || !apierrors.IsForbidden(se) {
			t.Fatalf("%s: status error %v, want ErrForbidden wrapping the server's 403", name, st.Err)
		}
		errs[name] = se
		f.Shutdown()
	}
	if !reflect.DeepEqual(errs["fast"].ErrStatus, errs["apimachinery"].ErrStatus) {
		t.Fatalf("forbidden: fast path %#v, apimachinery's %#v", errs["fast"].ErrStatus, errs["apimachinery"].ErrStatus)
	}
}
