// Package factorytest runs informerkit's dynamicinformer against a real
// kube-apiserver and etcd started in this test process.
package factorytest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

// Without the watch cache for configmaps, a watch from a compacted
// revision reaches etcd and gets 410 Gone (the reliability tests need it).
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{ExtraFlags: []string{"--watch-cache-sizes=configmaps#0"}}, &cp))
}

var seq struct {
	sync.Mutex
	n int
}

// uniqueGroup gives each test its own CRD group and namespace.
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

// newFactory is NewForConfig with opts (none, or one Options).
func newFactory(t *testing.T, cfg *rest.Config, opts ...dynamicinformer.Options) *dynamicinformer.Factory {
	t.Helper()
	var o dynamicinformer.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if os.Getenv("INFORMERKIT_TEST_LOG") != "" {
		o.Logger = funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{Verbosity: 4, LogTimestamp: true})
	}
	f, err := dynamicinformer.NewForConfig(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func obj(apiVersion, kind, ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]interface{}{"name": name},
		"spec":     map[string]interface{}{"value": name},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	u.SetLabels(labels)
	return u
}

// installCRD installs a fresh namespaced CRD in its own group and returns
// its GVR.
func installCRD(t *testing.T, ctx context.Context, opts ...controlplane.CRDOption) (schema.GroupVersionResource, string) {
	t.Helper()
	group := unique("g") + ".factory.example.com"
	crd := controlplane.NewCRD(group, "Widget", "widgets", opts...)
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	return controlplane.GVR(crd), crd.Name
}

func createN(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns string, n int, labels func(i int) map[string]string) {
	t.Helper()
	dyn := cp.Dynamic()
	for i := 0; i < n; i++ {
		var l map[string]string
		if labels != nil {
			l = labels(i)
		}
		o := obj(gvr.GroupVersion().String(), "Widget", ns, fmt.Sprintf("w-%d", i), l)
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// keysOf lists namespace/name@resourceVersion of objects, sorted.
func keysOf(objs []interface{}) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		u, err := meta.Accessor(o) // (a *cache.Compact too)
		if err != nil {
			panic(err)
		}
		out = append(out, u.GetNamespace()+"/"+u.GetName()+"@"+u.GetResourceVersion())
	}
	sort.Strings(out)
	return out
}

// serverKeys lists the server's objects the same way.
func serverKeys(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) []string {
	t.Helper()
	l, err := cp.Dynamic().Resource(gvr).Namespace(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]interface{}, 0, len(l.Items))
	for i := range l.Items {
		objs = append(objs, &l.Items[i])
	}
	return keysOf(objs)
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	eventuallySeen(t, ctx, what, cond, nil)
}

// eventuallySeen is eventually, and on a timeout the failure also says
// what seen reports (the state the test saw last).
func eventuallySeen(t *testing.T, ctx context.Context, what string, cond func() bool, seen func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		if seen != nil {
			t.Fatalf("timed out waiting for %s; saw %s", what, seen())
		}
		t.Fatalf("timed out waiting for %s", what)
	}
}

// recorder is an event handler that remembers the last state of each object
// and counts events.
type recorder struct {
	mu      sync.Mutex
	objects map[string]string // ns/name -> resourceVersion
	adds    int
	updates int
	deletes int
}

func newRecorder() *recorder { return &recorder{objects: map[string]string{}} }

func key(o interface{}) (string, string) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, err := meta.Accessor(o) // (a *cache.Compact too)
	if err != nil {
		panic(err)
	}
	return m.GetNamespace() + "/" + m.GetName(), m.GetResourceVersion()
}

func (r *recorder) OnAdd(o interface{}, _ bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, rv := key(o)
	r.objects[k] = rv
	r.adds++
}

func (r *recorder) OnUpdate(_, o interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, rv := key(o)
	r.objects[k] = rv
	r.updates++
}

func (r *recorder) OnDelete(o interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, _ := key(o)
	delete(r.objects, k)
	r.deletes++
}

func (r *recorder) snapshot() (objects map[string]string, adds, updates, deletes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := make(map[string]string, len(r.objects))
	for k, v := range r.objects {
		cp[k] = v
	}
	return cp, r.adds, r.updates, r.deletes
}
