package factorytest

import (
	"errors"
	"math/rand"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRBACPartialAccess: a user allowed to list and watch configmaps in
// one namespace and one CRD cluster-wide, and nothing else. The allowed
// informers sync and converge; the forbidden ones (configmaps in another
// namespace, secrets) report Failed with ErrForbidden (wrapping the API
// server's 403) within seconds; and nothing spins: over the next 10 s
// the forbidden informers retry at the reflector's backoff, a handful of
// requests each.
func TestRBACPartialAccess(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	sc := scenario(t)
	nsA, nsB := unique("rbac-a"), unique("rbac-b")
	for _, ns := range []string{nsA, nsB} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	crd, _ := installCRD(t, ctx)
	user := unique("user")
	if err := cp.Grant(ctx, user, nsA, "cm", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Grant(ctx, user, "", "crd", rbacv1.PolicyRule{APIGroups: []string{crd.Group}, Resources: []string{crd.Resource}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, crd, nsB, 3, nil)
	w := &writer{kube: cp.Kube(), ns: nsA, rnd: rand.New(rand.NewSource(11))}
	w.run(ctx, t, 30)

	cfg, counter := controlplane.CountRequests(cp.UserConfig(user))
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cfg)
	defer f.Shutdown()
	cmA := f.ForResource(configmaps, dynamicinformer.WithNamespaces(nsA))
	rec := newRecorder()
	if _, err := cmA.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	widgets := f.ForResource(crd)
	cmB := f.ForResource(configmaps, dynamicinformer.WithNamespaces(nsB))
	secrets := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, dynamicinformer.WithNamespaces(nsA))
	start := time.Now()
	f.Start(ctx)
	took := map[string]time.Duration{}
	for name, h := range map[string]*dynamicinformer.InformerHandle{"configmaps/" + nsB: cmB, "secrets/" + nsA: secrets} {
		eventually(t, ctx, name+" forbidden", func() bool { return h.Status().State == dynamicinformer.Failed })
		took[name] = time.Since(start).Round(time.Millisecond)
		st := h.Status()
		var ie *dynamicinformer.InformerError
		if !errors.Is(st.Err, dynamicinformer.ErrForbidden) || !errors.As(st.Err, &ie) || !apierrors.IsForbidden(ie.Err) {
			t.Fatalf("%s: status error %v, want ErrForbidden wrapping the API server's 403", name, st.Err)
		}
	}
	for name, h := range map[string]*dynamicinformer.InformerHandle{"configmaps/" + nsA: cmA, crd.Resource: widgets} {
		eventually(t, ctx, name+" synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	}
	n := converged(t, ctx, cmA, rec, nsA)
	if got := len(widgets.Informer().GetStore().ListKeys()); got != 3 {
		t.Fatalf("CRD informer holds %d objects, want 3", got)
	}
	// Nothing spins: count the requests of the next 10 s.
	counter.Reset()
	time.Sleep(10 * time.Second)
	retriesB := counter.Count("list", "/namespaces/"+nsB+"/configmaps") + counter.Count("watch", "/namespaces/"+nsB+"/configmaps")
	retriesSecrets := counter.Count("list", "/secrets") + counter.Count("watch", "/secrets")
	total := 0
	for _, c := range counter.Snapshot() {
		total += c
	}
	t.Logf("forbidden reported after %v; in 10 s: %d requests for forbidden configmaps, %d for secrets, %d in all: %v", took, retriesB, retriesSecrets, total, counter.Keys())
	// client-go's reflector backs off 800 ms doubling (with jitter) to 30 s:
	// at most ~4 attempts in 10 s, each a watch-list request and a list
	// (two requests). 16 leaves room; a spin is hundreds.
	if retriesB > 16 || retriesSecrets > 16 {
		t.Fatalf("forbidden informers retried %d and %d times in 10 s", retriesB, retriesSecrets)
	}
	if st := cmB.Status(); !errors.Is(st.Err, dynamicinformer.ErrForbidden) {
		t.Fatalf("status changed to %+v", st)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("user allowed list/watch of configmaps in one namespace and of one CRD only; informers on those plus configmaps in another namespace and secrets")
	sc.Held("allowed: synced, configmaps converged (%d objects), CRD 3 objects; forbidden: Failed with ErrForbidden after %v / %v; in the next 10 s %d and %d retries (reflector backoff), %d requests in all; no goroutine leak",
		n, took["configmaps/"+nsB], took["secrets/"+nsA], retriesB, retriesSecrets, total)
}
