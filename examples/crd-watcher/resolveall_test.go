package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// countingDiscovery counts discovery rounds (one ServerGroupsAndResources
// each).
type countingDiscovery struct {
	*fakediscovery.FakeDiscovery
	rounds atomic.Int64
}

func (d *countingDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.rounds.Add(1)
	return d.FakeDiscovery.ServerGroupsAndResourcesWithContext(ctx)
}

// Names discovery does not know (typos, or CRDs not yet installed under
// --wait-for-crds) are resolved together before any informer is made:
// each waits for a discovery round that started after it was asked, and
// the resolver starts at most one a second, so asked one after another
// each cost a round (a second or two, delaying every resource named
// after it); together they share one.
func TestResolveAllSharesOneRound(t *testing.T) {
	d := &countingDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}}},
	}}}}}
	r := discoveryresolver.New(d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Resolve(ctx, "pods"); err != nil { // the snapshot the names meet
		t.Fatal(err)
	}
	f := dynamicinformer.NewSharedInformerFactory(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), dynamicinformer.Options{Resolver: r, DisableCRDTracking: true})
	defer f.Shutdown()
	w := &watcher{factory: f, cfg: &Config{RequestTimeout: 10 * time.Second}}
	before := d.rounds.Load()
	names := []string{"pods", "a.v1.new.example.com", "b.v1.new.example.com", "c.v1.new.example.com", "nosuchthings", "pods"}
	specs := make([]ResourceSpec, len(names))
	for i, n := range names {
		specs[i] = ResourceSpec{Name: n}
	}
	got := w.resolveAll(ctx, specs)
	if len(got) != 5 {
		t.Fatalf("%d names resolved, want the 5 distinct ones: %v", len(got), got)
	}
	if rn := got["pods"]; rn.err != nil || rn.res.GVR.Resource != "pods" {
		t.Errorf("pods: %+v", rn)
	}
	for _, n := range names[1:5] {
		if rn := got[n]; !errors.Is(rn.err, discoveryresolver.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", n, rn.err)
		}
	}
	if n := d.rounds.Load() - before; n != 1 {
		t.Errorf("%d discovery rounds for 4 unknown names, want 1 (shared)", n)
	}
}
