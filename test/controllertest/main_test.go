// Package controllertest runs informerkit's controller package against a
// real kube-apiserver and etcd started in this test process.
package controllertest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp))
}

var seq struct {
	sync.Mutex
	n int
}

// unique gives each test its own CRD groups and namespaces.
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

func newFactory(t *testing.T, cfg *rest.Config) *dynamicinformer.Factory {
	t.Helper()
	f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{RediscoveryInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// installCRD installs a namespaced CRD of kind Widget in a fresh group.
func installCRD(t *testing.T, ctx context.Context, opts ...controlplane.CRDOption) (schema.GroupVersionResource, string) {
	t.Helper()
	group := unique("g") + ".controller.example.com"
	crd := controlplane.NewCRD(group, "Widget", "widgets", opts...)
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	return controlplane.GVR(crd), crd.Name
}

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := unique("ns")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func widget(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"value": name},
	}}
}

// createN creates w-0 … w-(n-1) and returns their keys.
func createN(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns string, n int) []controller.Key {
	t.Helper()
	keys := make([]controller.Key, n)
	for i := range n {
		name := fmt.Sprintf("w-%d", i)
		if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, widget(gvr, ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		keys[i] = controller.Key{GVR: gvr, Namespace: ns, Name: name}
	}
	return keys
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// call is one Reconcile call as the journal saw it.
type call struct {
	at   time.Time
	gone bool
	rv   string // the cached object's resourceVersion
}

// journal records every Reconcile call per key.
type journal struct {
	mu    sync.Mutex // guards calls
	calls map[controller.Key][]call
}

func newJournal() *journal { return &journal{calls: map[controller.Key][]call{}} }

func (j *journal) record(req controller.Request) {
	c := call{at: time.Now(), gone: req.Gone()}
	if !c.gone {
		c.rv = req.Object.(metav1.Object).GetResourceVersion()
	}
	j.mu.Lock()
	j.calls[req.Key] = append(j.calls[req.Key], c)
	j.mu.Unlock()
}

func (j *journal) of(k controller.Key) []call {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]call(nil), j.calls[k]...)
}

// count returns the number of calls of k.
func (j *journal) count(k controller.Key) int { return len(j.of(k)) }

// total counts the calls of keys of gvr.
func (j *journal) total(gvr schema.GroupVersionResource) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for k, c := range j.calls {
		if k.GVR == gvr {
			n += len(c)
		}
	}
	return n
}

// countsNot lists the keys of want whose call count is not n, sorted.
func (j *journal) countsNot(want []controller.Key, n int) []string {
	var bad []string
	for _, k := range want {
		if c := j.count(k); c != n {
			bad = append(bad, fmt.Sprintf("%s: %d calls", k, c))
		}
	}
	sort.Strings(bad)
	return bad
}

// running runs c until the returned stop is called; stop returns Run's
// error.
func running(t *testing.T, ctx context.Context, c *controller.Controller) (stop func() error) {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute):
				err = fmt.Errorf("Run did not return 2 minutes after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// handle returns the concrete handle of ForResource.
func handle(t *testing.T, f *dynamicinformer.Factory, gvr schema.GroupVersionResource) *dynamicinformer.InformerHandle {
	t.Helper()
	return f.ForResource(gvr)
}
