package presence

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

const group = "example.com"

func gvr(version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// crdVersion is one version of a CRD: its name and whether it is served.
type crdVersion struct {
	name   string
	served bool
}

// crd builds a CustomResourceDefinition as the API server returns it
// (with a schema presence does not need, to exercise slimming).
func crd(plural string, established bool, versions ...crdVersion) *unstructured.Unstructured {
	var vs []interface{}
	for _, v := range versions {
		vs = append(vs, map[string]interface{}{"name": v.name, "served": v.served, "storage": true,
			"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{"type": "object"}}})
	}
	status := "False"
	if established {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]interface{}{"name": plural + "." + group},
		"spec": map[string]interface{}{
			"group": group, "scope": "Namespaced",
			"names":    map[string]interface{}{"plural": plural, "kind": "X"},
			"versions": vs,
		},
		"status": map[string]interface{}{"conditions": []interface{}{
			map[string]interface{}{"type": "NamesAccepted", "status": "True"},
			map[string]interface{}{"type": "Established", "status": status},
		}},
	}}
}

func v(name string) crdVersion        { return crdVersion{name, true} }
func unserved(name string) crdVersion { return crdVersion{name, false} }
func crdClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{CRDResource: "CustomResourceDefinitionList"}, objs...)
}

// waitWatching waits until the CRD informer's watch is open: the fake
// client drops events between its list and its watch.
func waitWatching(t *testing.T, c *dynamicfake.FakeDynamicClient) {
	t.Helper()
	waitFor(t, "the CRD watch", func() bool {
		for _, a := range c.Actions() {
			if a.GetVerb() == "watch" && a.GetResource() == CRDResource {
				return true
			}
		}
		return false
	})
}

func createCRD(t *testing.T, c *dynamicfake.FakeDynamicClient, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := c.Resource(CRDResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updateCRD(t *testing.T, c *dynamicfake.FakeDynamicClient, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := c.Resource(CRDResource).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deleteCRD(t *testing.T, c *dynamicfake.FakeDynamicClient, name string) {
	t.Helper()
	if err := c.Resource(CRDResource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// discoveryOf serves the given resource lists; the first list of a group
// is its preferred version.
func discoveryOf(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	return &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}
}

func resourceList(gv string, resources ...metav1.APIResource) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: resources}
}

func apiResource(plural string, namespaced bool) metav1.APIResource {
	return metav1.APIResource{Name: plural, Kind: "X", Namespaced: namespaced, Verbs: metav1.Verbs{"list", "watch", "get"}}
}

// rounds counts discovery rounds (each starts with a "get group").
func rounds(d *fakediscovery.FakeDiscovery) int {
	n := 0
	for _, a := range d.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "group" {
			n++
		}
	}
	return n
}

func resolverOf(d *fakediscovery.FakeDiscovery) *discoveryresolver.Resolver {
	return discoveryresolver.New(d)
}

// member is a stub informer: it records the verdicts and moves presence
// gives it; MoveTo switches its version as an informer does.
type member struct {
	follows, namespaced bool

	mu       sync.Mutex // guards gvr, verdicts, moves, onApply
	gvr      schema.GroupVersionResource
	verdicts []Verdict
	applied  []time.Time
	moves    []string
	onApply  func(Verdict)
}

func newMember(g schema.GroupVersionResource) *member { return &member{gvr: g} }

func (m *member) GVR() schema.GroupVersionResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gvr
}
func (m *member) Follows() bool    { return m.follows }
func (m *member) Namespaced() bool { return m.namespaced }
func (m *member) Apply(v Verdict) {
	m.mu.Lock()
	m.verdicts = append(m.verdicts, v)
	m.applied = append(m.applied, time.Now())
	f := m.onApply
	m.mu.Unlock()
	if f != nil {
		f(v)
	}
}
func (m *member) MoveTo(v, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moves = append(m.moves, v)
	m.gvr.Version = v
}

func (m *member) last() (Verdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.verdicts) == 0 {
		return Verdict{}, false
	}
	return m.verdicts[len(m.verdicts)-1], true
}

func (m *member) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.verdicts)
}

func (m *member) movedTo() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.moves...)
}

// waitVerdict waits until the member's last verdict satisfies ok.
func (m *member) waitVerdict(t *testing.T, what string, ok func(Verdict) bool) Verdict {
	t.Helper()
	var got Verdict
	waitFor(t, what, func() bool {
		v, applied := m.last()
		got = v
		return applied && ok(v)
	})
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run runs p until the test ends, then checks that Run returned and left
// no goroutine behind.
func run(t *testing.T, p *Presence) (stop func()) {
	t.Helper()
	check := leakcheck.Snapshot("informerkit/dynamicinformer")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			check(t)
		})
	}
	t.Cleanup(stop)
	return stop
}

func served(v Verdict) bool         { return v.Served && !v.Checking && v.Err == nil }
func knownServed(v Verdict) bool    { return served(v) && v.Known }
func knownNotServed(v Verdict) bool { return !v.Served && v.Known && !v.Checking && v.Err == nil }
func assumedServed(v Verdict) bool  { return served(v) && !v.Known }
