// Package crcachetest runs informerkit's controller-runtime cache
// (module github.com/informerkit/informerkit/controllerruntime) against a
// real kube-apiserver and etcd started in this test process, side by side
// with controller-runtime's own cache on the same objects.
package crcachetest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/go-logr/logr"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp))
}

var seq struct {
	sync.Mutex
	n int
}

func unique(prefix string) string {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return fmt.Sprintf("%s%d", prefix, seq.n)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Widget is a user's own CRD type (typed objects of a CRD).
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

type WidgetSpec struct {
	Value string `json:"value,omitempty"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func (l *WidgetList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Widget, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Widget)
	}
	return &c
}

// newWidgetCRD builds (does not install) a Widget CRD in a group of its
// own, and a scheme with client-go's types and Widget at its version.
func newWidgetCRD() (c *crdDef) {
	group := unique("g") + ".crcache.example.com"
	def := controlplane.NewCRD(group, "Widget", "widgets")
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(gv, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, gv)
	return &crdDef{def: def, gvr: controlplane.GVR(def), gvk: gv.WithKind("Widget"), scheme: s}
}

type crdDef struct {
	def    *apiextensionsv1.CustomResourceDefinition
	gvr    schema.GroupVersionResource
	gvk    schema.GroupVersionKind
	scheme *runtime.Scheme
}

func (c *crdDef) install(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := cp.InstallCRD(ctx, c.def.DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

func (c *crdDef) widget(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": c.gvr.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"value": name},
	}}
	u.SetLabels(labels)
	return u
}

func (c *crdDef) create(t *testing.T, ctx context.Context, ns, name string, labels map[string]string) {
	t.Helper()
	if _, err := cp.Dynamic().Resource(c.gvr).Namespace(ns).Create(ctx, c.widget(ns, name, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *crdDef) u() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(c.gvk)
	return u
}

func (c *crdDef) ulist() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(c.gvk.GroupVersion().WithKind("WidgetList"))
	return l
}

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := unique("ns")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func createConfigMap(t *testing.T, ctx context.Context, ns, name string, labels map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: map[string]string{"k": name}}
	if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pair is informerkit's cache and controller-runtime's, made with the same
// options on the same server.
type pair struct {
	ik, cr crcache.Cache
}

// newPair makes both caches, runs setup on each (IndexField, informers)
// before starting them, starts them and stops them at the end of the
// test (waiting for Start to return).
func newPair(t *testing.T, ctx context.Context, cfg *rest.Config, opts crcache.Options, setup func(crcache.Cache)) pair {
	t.Helper()
	ik, err := controllerruntime.NewCache(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := crcache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := pair{ik: ik, cr: cr}
	for _, c := range []crcache.Cache{ik, cr} {
		if setup != nil {
			setup(c)
		}
		runCache(t, ctx, c)
	}
	return p
}

// runCache starts c until the end of the test and waits for it to sync.
func runCache(t *testing.T, ctx context.Context, c crcache.Cache) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync: false")
	}
}

// keyed is a list's items by namespace/name.
func keyed(t *testing.T, list runtime.Object) map[string]runtime.Object {
	t.Helper()
	out, err := keyedErr(list)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keyedErr is keyed's map, or the error that prevents it.
func keyedErr(list runtime.Object) (map[string]runtime.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := map[string]runtime.Object{}
	for _, it := range items {
		m, err := apimeta.Accessor(it)
		if err != nil {
			return nil, err
		}
		out[m.GetNamespace()+"/"+m.GetName()] = it
	}
	return out, nil
}

func sortedKeys(m map[string]runtime.Object) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ = client.ObjectKey{}
