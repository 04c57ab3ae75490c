package factorytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestCRDRemovedWithoutCRDRBAC: for a user who may list and watch a
// custom resource but not CustomResourceDefinitions (presence then has
// discovery and 404 answers only), on a cluster where one aggregated API
// is unavailable (as a stopped metrics-server leaves it: discovery is
// partial, so a resource it does not list is not known to be gone),
// deleting the CRD makes the informer Removed (ErrNotServed), and it
// stays Removed — no Syncing — through 4 of its re-checks (at most
// INFORMERKIT_NORBAC_HOLD seconds, default 60), with no more than the
// re-checks' lists (back-off doubling to a minute); re-created, the CRD brings the informer back to Synced by
// itself.
func TestCRDRemovedWithoutCRDRBAC(t *testing.T) {
	// Not parallel: its unavailable APIService makes every client's
	// discovery partial while it runs.
	hold := time.Duration(envInt(t, "INFORMERKIT_NORBAC_HOLD", 60)) * time.Second
	ctx := ctxT(t, 5*time.Minute)
	sc := scenario(t)
	gvr, name := installCRD(t, ctx)
	ns := unique("norbac")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 3, nil)
	apisvc := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	broken := unique("broken") + ".factory.example.com"
	if _, err := cp.Dynamic().Resource(apisvc).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]interface{}{"name": "v1." + broken},
		"spec": map[string]interface{}{"group": broken, "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true, "service": map[string]interface{}{"namespace": "default", "name": "no-such-service"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cp.Dynamic().Resource(apisvc).Delete(context.Background(), "v1."+broken, metav1.DeleteOptions{})
	}()
	user := unique("no-crd-rbac")
	if err := cp.Grant(ctx, user, "", "read", rbacv1.PolicyRule{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	cfg, counter := controlplane.CountRequests(cp.UserConfig(user))
	f := newFactory(t, cfg)
	defer f.Shutdown()
	h := f.ForResource(gvr)
	var mu sync.Mutex
	var trail []string
	f.OnStatusChange(func(s dynamicinformer.Status) {
		if s.GVR != gvr {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		step := fmt.Sprintf("%s (%s)", s.State, s.Reason)
		if len(trail) == 0 || trail[len(trail)-1] != step {
			trail = append(trail, step)
		}
	})
	f.Start(ctx)
	eventually(t, ctx, "Synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	mu.Lock()
	trail = nil
	mu.Unlock()

	deleted := time.Now()
	if err := cp.DeleteCRD(ctx, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Removed", func() bool { return h.Status().State == dynamicinformer.Removed })
	removedAfter := time.Since(deleted).Round(time.Millisecond)
	if st := h.Status(); !errors.Is(st.Err, dynamicinformer.ErrNotServed) {
		t.Fatalf("Removed status error %v, want ErrNotServed", st.Err)
	}
	path := "/" + gvr.Resource
	time.Sleep(time.Second) // in-flight requests of the removal end
	before := counter.Count("list", path) + counter.Count("watch", path)
	// The hold is counted: it ends when the informer has re-checked the
	// resource (a list answered 404) 4 times, staying Removed throughout,
	// or after INFORMERKIT_NORBAC_HOLD, whichever comes first.
	const rechecks = 4
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) && counter.Count("list", path)+counter.Count("watch", path)-before < rechecks {
		if st := h.Status(); st.State != dynamicinformer.Removed {
			mu.Lock()
			states := strings.Join(trail, " → ")
			mu.Unlock()
			t.Fatalf("%v after the CRD was deleted: %s, want Removed until it is served again; states: %s",
				time.Since(deleted).Round(time.Millisecond), st.State, states)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := time.Since(deleted)
	requests := counter.Count("list", path) + counter.Count("watch", path) - before
	if limit := int(held/time.Minute)*2 + 8; requests > limit {
		t.Fatalf("%d list/watch requests for the removed resource in %v, want at most the re-checks' %d: %v", requests, held.Round(time.Millisecond), limit, counter.Keys())
	}
	t.Logf("held Removed for %v: %d list/watch requests for the resource", held.Round(time.Millisecond), requests)

	crd := controlplane.NewCRD(gvr.Group, "Widget", "widgets")
	installed := time.Now()
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Synced after the CRD is back", func() bool { return h.Status().State == dynamicinformer.Synced })
	back := time.Since(installed).Round(time.Millisecond)
	mu.Lock()
	states := strings.Join(trail, " → ")
	mu.Unlock()
	t.Logf("Removed %v after the delete; Removed for %v with %d list/watch requests; Synced %v after the CRD was re-installed; states: %s", removedAfter, held.Round(time.Millisecond), requests, back, states)
	sc.Injected("a user who may list and watch a CRD's resource but not CustomResourceDefinitions, an unavailable aggregated API; the CRD deleted, %v later re-created", held.Round(time.Second))
	sc.Held("Removed (ErrNotServed) %v after the delete, still Removed %v later (%d list/watch requests: the re-checks); Synced %v after re-creation", removedAfter, held.Round(time.Millisecond), requests, back)
}
