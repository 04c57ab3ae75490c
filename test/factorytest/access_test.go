package factorytest

import (
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRBACPreflight: with WithAccessCheck, an informer whose user may not
// list or watch its resource asks the server first (SelfSubjectAccessReview)
// and sends no list or watch: one informer cluster-wide for a user with no
// access (Failed, ErrForbidden naming list and watch in all namespaces),
// one in a namespace where the user may list but not watch (Failed,
// ErrForbidden naming watch only). Over the next seconds neither sends a
// list or watch (the check is repeated on its back-off). Once a
// ClusterRole with list and watch is bound, both recover to Synced by
// themselves and hold the server's objects. Nothing is left running after
// Shutdown.
func TestRBACPreflight(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	sc := scenario(t)
	ns := unique("preflight")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crd, _ := installCRD(t, ctx)
	createN(t, ctx, crd, ns, 3, nil)
	user := unique("preflight-user")
	if err := cp.Grant(ctx, user, ns, "list-only", rbacv1.PolicyRule{APIGroups: []string{crd.Group}, Resources: []string{crd.Resource}, Verbs: []string{"list"}}); err != nil {
		t.Fatal(err)
	}

	cfg, counter := controlplane.CountRequests(cp.UserConfig(user))
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cfg, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithAccessCheck(true)}})
	defer f.Shutdown()
	all := f.ForResource(crd)
	inNS := f.ForResource(crd, dynamicinformer.WithNamespaces(ns))
	start := time.Now()
	f.Start(ctx)
	for name, h := range map[string]*dynamicinformer.InformerHandle{"cluster-wide": all, ns: inNS} {
		eventually(t, ctx, name+" denied", func() bool { return h.Status().State == dynamicinformer.Failed })
	}
	denied := time.Since(start).Round(time.Millisecond)
	stAll, stNS := all.Status(), inNS.Status()
	for _, c := range []struct {
		name string
		st   dynamicinformer.Status
		want string
	}{
		{"cluster-wide", stAll, `user "` + user + `" may not list, watch ` + crd.Resource + "." + crd.Group + " in all namespaces"},
		{ns, stNS, `(SelfSubjectRulesReview): user "` + user + `" may not watch ` + crd.Resource + "." + crd.Group + " in namespace " + ns},
	} {
		if !errors.Is(c.st.Err, dynamicinformer.ErrForbidden) || !strings.Contains(c.st.Err.Error(), c.want) {
			t.Fatalf("%s: status error %v, want ErrForbidden saying %q", c.name, c.st.Err, c.want)
		}
	}
	if strings.Contains(stNS.Err.Error(), "may not list") {
		t.Fatalf("%s: %v names list, which the user may do", ns, stNS.Err)
	}
	// Nothing is sent for the resource while access is denied; the check
	// is repeated (1 s doubling).
	time.Sleep(4 * time.Second)
	path := "/" + crd.Resource
	requests := counter.Count("list", path) + counter.Count("watch", path)
	reviews := counter.Count("post", "selfsubjectaccessreviews") + counter.Count("post", "selfsubjectrulesreviews")
	if requests != 0 {
		t.Fatalf("%d list/watch requests for %s while access was denied, want 0: %v", requests, crd.Resource, counter.Keys())
	}
	if reviews < 4 {
		t.Fatalf("%d reviews in ~4 s, want the first check and re-checks (a rules review each, per informer)", reviews)
	}
	if st := all.Status(); st.State != dynamicinformer.Failed || !st.Since.Equal(stAll.Since) {
		t.Fatalf("cluster-wide status changed while still denied: %+v", st)
	}

	// Grant: both recover by themselves.
	if err := cp.Grant(ctx, user, "", "read", rbacv1.PolicyRule{APIGroups: []string{crd.Group}, Resources: []string{crd.Resource}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	for name, h := range map[string]*dynamicinformer.InformerHandle{"cluster-wide": all, ns: inNS} {
		eventually(t, ctx, name+" synced after the grant", func() bool { return h.Status().State == dynamicinformer.Synced })
	}
	recovered := time.Since(granted).Round(time.Millisecond)
	for name, h := range map[string]*dynamicinformer.InformerHandle{"cluster-wide": all, ns: inNS} {
		if st := h.Status(); st.Err != nil || st.Objects != 3 {
			t.Fatalf("%s after the grant: %+v, want Synced with 3 objects", name, st)
		}
	}
	convergedResource(t, ctx, all, nil, crd, "")
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	t.Logf("denied after %v; %d reviews, 0 list/watch requests in 4 s; Synced %v after the grant", denied, reviews, recovered)
	sc.Injected("WithAccessCheck; a user with no access to a CRD cluster-wide and list but not watch in one namespace; after ~4 s a ClusterRole with list and watch bound")
	sc.Held("both Failed with ErrForbidden after %v, naming `list, watch` in all namespaces and `watch` in the namespace; 0 list/watch requests for the resource and %d access reviews in the next 4 s; both Synced with the 3 objects %v after the grant, without being touched; no goroutine leak",
		denied, reviews, recovered)
}
