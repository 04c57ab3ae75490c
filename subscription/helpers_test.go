package subscription

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

var (
	widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
)

func fakeClient(objs ...kruntime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		widgets: "WidgetList",
		gadgets: "GadgetList",
	}, objs...)
}

func object(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	kind := map[string]string{"widgets": "Widget", "gadgets": "Gadget"}[gvr.Resource]
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
}

// served is a discovery list of example.com/v1 with the given resources,
// each namespaced and watchable, in category "things" unless listed in
// uncategorized.
func served(resources []string, uncategorized ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: "example.com/v1"}
	for _, r := range resources {
		res := metav1.APIResource{Name: r, Kind: r, Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}, Categories: []string{"things"}}
		for _, u := range uncategorized {
			if u == r {
				res.Categories = nil
			}
		}
		l.APIResources = append(l.APIResources, res)
	}
	return l
}

// lockedDiscovery is client-go's fake discovery with resources the test
// may change while the factory reads them.
type lockedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu sync.Mutex // guards FakeDiscovery.Resources
}

func newLockedDiscovery(lists ...*metav1.APIResourceList) *lockedDiscovery {
	return &lockedDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}}
}

func (d *lockedDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsAndResourcesWithContext(ctx)
}

func (d *lockedDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return d.ServerGroupsAndResourcesWithContext(context.Background())
}

func (d *lockedDiscovery) ServerResourcesForGroupVersionWithContext(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
}

func (d *lockedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return d.ServerResourcesForGroupVersionWithContext(context.Background(), gv)
}

func (d *lockedDiscovery) setResources(lists ...*metav1.APIResourceList) {
	d.mu.Lock()
	d.Resources = lists
	d.mu.Unlock()
}

// rounds counts discovery rounds (each asks for the groups first).
func (d *lockedDiscovery) rounds() int {
	n := 0
	for _, a := range d.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "group" {
			n++
		}
	}
	return n
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watching reports whether the fake client has been asked to watch gvr
// (it drops events between a list and its watch).
func watching(c *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource) bool {
	for _, a := range c.Actions() {
		if a.GetVerb() == "watch" && a.GetResource() == gvr {
			return true
		}
	}
	return false
}

// newGoroutinesCheck fails a test that leaves goroutines of informerkit
// running (the subscription's and the factory's; see leakcheck.Snapshot).
func newGoroutinesCheck() func(t testing.TB) {
	return leakcheck.Snapshot("github.com/informerkit/informerkit/")
}

// eventLog records a subscription's events.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) get() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}
