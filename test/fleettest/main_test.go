// Package fleettest runs informerkit's fleet package against three real
// control planes (each its own etcd and kube-apiserver) started in this test
// process.
package fleettest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/fleet"
	"github.com/informerkit/informerkit/test/controlplane"
)

// cp is the first control plane (RunTests'), also the hub of the Secret
// source; others are the second and third.
var (
	cp     *controlplane.ControlPlane
	others [2]*controlplane.ControlPlane
)

// TestMain starts two control planes, then runs the tests through RunTests
// (which starts the first, checks for goroutines left and stops it), then
// stops the two. They start one after the other: on a loaded machine,
// API servers starting together can miss their RBAC bootstrap deadline.
func TestMain(m *testing.M) {
	code := 0
	for i := range others {
		var err error
		if others[i], err = controlplane.Start(context.Background(), controlplane.Options{}); err != nil {
			fmt.Fprintf(os.Stderr, "control plane %d: cannot start: %v\n", i+2, err)
			code = 1
			break
		}
	}
	if code == 0 {
		code = controlplane.RunTests(m, controlplane.Options{}, &cp)
	}
	for _, o := range others {
		if o != nil {
			o.Stop()
		}
	}
	os.Exit(code)
}

// planes returns the three control planes, by cluster name a, b, c.
func planes() map[string]*controlplane.ControlPlane {
	return map[string]*controlplane.ControlPlane{"a": cp, "b": others[0], "c": others[1]}
}

var seq struct {
	sync.Mutex
	n int
}

// unique gives each test its own CRD group and namespace.
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

// waitFor waits for cond (up to d), failing with what was awaited and what
// was last seen.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", d, what, seen)
		}
		<-tick.C
	}
}

// widgetCRD is a namespaced CRD of kind Widget in group.
func widgetCRD(group string) (schema.GroupVersionResource, *apiextensionsv1.CustomResourceDefinition) {
	crd := controlplane.NewCRD(group, "Widget", "widgets")
	return controlplane.GVR(crd), crd
}

// install installs crd in each control plane.
func install(t *testing.T, ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, cs ...*controlplane.ControlPlane) {
	t.Helper()
	for _, c := range cs {
		if err := c.InstallCRD(ctx, crd.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
}

func namespace(t *testing.T, ctx context.Context, ns string, cs ...*controlplane.ControlPlane) {
	t.Helper()
	for _, c := range cs {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
}

func widget(gvr schema.GroupVersionResource, ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"value": name},
	}}
	u.SetLabels(labels)
	return u
}

// create creates the widgets names in ns of c.
func create(t *testing.T, ctx context.Context, c *controlplane.ControlPlane, gvr schema.GroupVersionResource, ns string, labels map[string]string, names ...string) {
	t.Helper()
	dyn := c.Dynamic()
	for _, n := range names {
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, widget(gvr, ns, n, labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// kubeconfigOf is a kubeconfig (one context, "ctx") for cfg, as the
// control plane's configs are: a token and no TLS verification, and
// impersonation if cfg has it.
func kubeconfigOf(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, Impersonate: cfg.Impersonate.UserName}
	kc.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "ctx"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// recorder is a fleet.Handler that keeps the last state of each object per
// cluster and counts events per cluster.
type recorder struct {
	mu      sync.Mutex                   // guards every field
	objects map[string]map[string]string // cluster -> ns/name -> resourceVersion
	adds    map[string]int
	updates map[string]int
	deletes map[string]int
	// overlap counts calls for one cluster that ran while another call for
	// the same cluster was running (the contract says: never).
	running map[string]bool
	overlap int
	// bad records contract violations (an add of a held object, a delete
	// of an unknown one).
	bad []string
}

func newRecorder() *recorder {
	return &recorder{objects: map[string]map[string]string{}, adds: map[string]int{}, updates: map[string]int{},
		deletes: map[string]int{}, running: map[string]bool{}}
}

func objKey(o any) (string, string) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, err := meta.Accessor(o)
	if err != nil {
		panic(err)
	}
	return m.GetNamespace() + "/" + m.GetName(), m.GetResourceVersion()
}

func (r *recorder) enter(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[cluster] {
		r.overlap++
	}
	r.running[cluster] = true
}

func (r *recorder) leave(cluster string) {
	r.mu.Lock()
	r.running[cluster] = false
	r.mu.Unlock()
}

func (r *recorder) OnAdd(cluster string, obj any, _ bool) {
	r.enter(cluster)
	defer r.leave(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	k, rv := objKey(obj)
	if r.objects[cluster] == nil {
		r.objects[cluster] = map[string]string{}
	}
	if _, ok := r.objects[cluster][k]; ok {
		r.bad = append(r.bad, "add of held "+cluster+":"+k)
	}
	r.objects[cluster][k] = rv
	r.adds[cluster]++
}

func (r *recorder) OnUpdate(cluster string, _, obj any) {
	r.enter(cluster)
	defer r.leave(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	k, rv := objKey(obj)
	if _, ok := r.objects[cluster][k]; !ok {
		r.bad = append(r.bad, "update of unknown "+cluster+":"+k)
	}
	r.objects[cluster][k] = rv
	r.updates[cluster]++
}

func (r *recorder) OnDelete(cluster string, obj any) {
	r.enter(cluster)
	defer r.leave(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	k, _ := objKey(obj)
	if _, ok := r.objects[cluster][k]; !ok {
		r.bad = append(r.bad, "delete of unknown "+cluster+":"+k)
	}
	delete(r.objects[cluster], k)
	r.deletes[cluster]++
}

// names lists the ns/name keys held of cluster, sorted.
func (r *recorder) names(cluster string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.objects[cluster] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *recorder) counts(cluster string) (adds, updates, deletes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adds[cluster], r.updates[cluster], r.deletes[cluster]
}

func (r *recorder) violations() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overlap, append([]string(nil), r.bad...)
}

// holds waits until the recorder holds exactly want (ns/name keys) of
// cluster.
func (r *recorder) holds(t *testing.T, cluster string, want ...string) {
	t.Helper()
	sort.Strings(want)
	waitFor(t, 90*time.Second, fmt.Sprintf("the handler to hold %v of cluster %s", want, cluster), func() (bool, string) {
		got := r.names(cluster)
		return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("%v", got)
	})
}

func keys(ns string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ns + "/" + n
	}
	return out
}

// itemKeys lists cluster:ns/name of items, sorted.
func itemKeys(items []fleet.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Cluster + ":" + it.Object.GetNamespace() + "/" + it.Object.GetName()
	}
	sort.Strings(out)
	return out
}

// clusterStatus returns the resource's status in cluster.
func clusterStatus(r *fleet.Resource, cluster string) fleet.ClusterResourceStatus {
	st, _ := r.Status().Cluster(cluster)
	return st
}

func describe(r *fleet.Resource) string {
	var parts []string
	for _, c := range r.Status().Clusters {
		s := fmt.Sprintf("%s=%s synced=%v objects=%d", c.Cluster, c.State, c.HasSynced, c.Objects)
		if c.Err != nil {
			s += " err=" + c.Err.Error()
		}
		if c.ContactErr != nil {
			s += " contact=" + c.ContactErr.Error()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// newFleet starts a fleet on src and shuts it down at the end of t.
func newFleet(t *testing.T, src fleet.Source) *fleet.Fleet {
	t.Helper()
	f := fleet.New(src, fleet.Options{})
	f.Start(context.Background())
	t.Cleanup(f.Shutdown)
	return f
}
