package factorytest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// accessStartResources is how many resources the access-check start
// measurement watches (the crd-watcher report's cluster: 85).
// By default 45 (35 built-in, 10 CRDs): the same checks on fewer
// resources; INFORMERKIT_LONG restores 85.
var accessStartResources = controlplane.Sized(45, 85)

// TestAccessCheckStartCost measures what WithAccessCheck adds to a
// factory's start on many resources: time from Start until every
// informer is Synced, with and without the check, on a client with
// client-go's default request budget (QPS 5, burst 10: a kubeconfig's),
// for three users: an admin watching every resource in all namespaces
// (crd-watcher --all), a user whose ClusterRole names each resource
// (list, watch; no wildcard) in all namespaces, and a user with Roles in
// three namespaces watching the namespaced resources there. It logs the
// medians of INFORMERKIT_ACCESS_RUNS runs (default 1; docs/PERFORMANCE.md
// records a run of 5) and the reviews sent, and asserts what does not
// depend on the machine: every informer syncs, and the reviews are asked
// for many resources at once — an admin's check, and that of a user whose
// ClusterRole names each resource, costs a few reviews, not two per
// resource; a namespaced check costs rules reviews (one per
// namespace), not access reviews per resource and namespace.
func TestAccessCheckStartCost(t *testing.T) {
	controlplane.Parallel(t)
	if testing.Short() {
		t.Skip("load test")
	}
	runs := envInt(t, "INFORMERKIT_ACCESS_RUNS", 1)
	ctx := ctxT(t, 30*time.Minute)
	sc := scenario(t)

	// Built-in resources that can be listed and watched, then CRDs to
	// make up accessStartResources.
	// Other tests' CRDs come and go (some deliberately broken): a group
	// whose discovery fails is not one of the built-ins wanted here.
	lists, err := cp.Kube().Discovery().ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatal(err)
	}
	type res struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}
	var all []res
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		if strings.HasSuffix(gv.Group, ".example.com") {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			all = append(all, res{gv.WithResource(r.Name), r.Namespaced})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].gvr.String() < all[j].gvr.String() })
	if most := accessStartResources - 10; len(all) > most {
		all = all[:most] // at least 10 CRDs beside the built-ins
	}
	builtin := len(all)
	nss := []string{unique("access-a"), unique("access-b"), unique("access-c")}
	for _, ns := range nss {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	prefix := unique("as")
	for i := 0; len(all) < accessStartResources; i++ {
		group := fmt.Sprintf("%s-%d.access.example.com", prefix, i%8)
		crd := controlplane.NewCRD(group, fmt.Sprintf("Thing%d", i), fmt.Sprintf("things%d", i))
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
		gvr := controlplane.GVR(crd)
		o := obj(gvr.GroupVersion().String(), fmt.Sprintf("Thing%d", i), nss[0], "t", nil)
		if _, err := cp.Dynamic().Resource(gvr).Namespace(nss[0]).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		all = append(all, res{gvr, true})
	}

	// RBAC: one rule per group naming its resources.
	rules := func(namespacedOnly bool) []rbacv1.PolicyRule {
		byGroup := map[string][]string{}
		var groups []string
		for _, r := range all {
			if namespacedOnly && !r.namespaced {
				continue
			}
			if _, ok := byGroup[r.gvr.Group]; !ok {
				groups = append(groups, r.gvr.Group)
			}
			byGroup[r.gvr.Group] = append(byGroup[r.gvr.Group], r.gvr.Resource)
		}
		var out []rbacv1.PolicyRule
		for _, g := range groups {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: byGroup[g], Verbs: []string{"list", "watch"}})
		}
		return out
	}
	clusterUser, nsUser := unique("access-viewer"), unique("access-ns-viewer")
	if err := cp.Grant(ctx, clusterUser, "", "view-all", rules(false)...); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if err := cp.Grant(ctx, nsUser, ns, "view-ns", rules(true)...); err != nil {
			t.Fatal(err)
		}
	}
	defaultBudget := func(c *rest.Config) *rest.Config { c.QPS, c.Burst = 0, 0; return c }

	type user struct {
		name       string
		cfg        func() *rest.Config
		namespaces []string
	}
	users := []user{
		{"admin, all namespaces", func() *rest.Config { return defaultBudget(cp.Config()) }, nil},
		{"ClusterRole naming each resource, all namespaces", func() *rest.Config { return defaultBudget(cp.UserConfig(clusterUser)) }, nil},
		{"Roles in 3 namespaces", func() *rest.Config { return defaultBudget(cp.UserConfig(nsUser)) }, nss},
	}
	type sample struct {
		synced           time.Duration
		ssar, ssrr, list int
	}
	measure := func(u user, check bool) sample {
		t.Helper()
		cfg, counter := controlplane.CountRequests(u.cfg())
		leaks := controlplane.SnapshotGoroutines()
		f := newFactory(t, cfg, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithAccessCheck(check)}})
		var hs []*dynamicinformer.InformerHandle
		for _, r := range all {
			if u.namespaces != nil && !r.namespaced {
				continue
			}
			var opts []dynamicinformer.ResourceOption
			if u.namespaces != nil {
				opts = append(opts, dynamicinformer.WithNamespaces(u.namespaces...))
			}
			hs = append(hs, f.ForResource(r.gvr, opts...))
		}
		start := time.Now()
		f.Start(ctx)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		synced := f.WaitForCacheSync(wctx)
		cancel()
		took := time.Since(start)
		for gvr, ok := range synced {
			if !ok {
				t.Fatalf("%s (check %v): %s did not sync: %+v", u.name, check, gvr, f.Statuses())
			}
		}
		if len(synced) != len(hs) {
			t.Fatalf("%s: %d informers synced, want %d", u.name, len(synced), len(hs))
		}
		s := sample{synced: took, ssar: counter.Count("post", "selfsubjectaccessreviews"),
			ssrr: counter.Count("post", "selfsubjectrulesreviews"), list: counter.Count("list", "")}
		f.Shutdown()
		leaks.VerifyNoLeaks(t)
		return s
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	var report []string
	// One review of each kind, as the namespaced user: which is cheaper
	// per request (a rules review answers for every resource).
	{
		kube := kubernetes.NewForConfigOrDie(cp.UserConfig(nsUser))
		var ssar, ssrr []time.Duration
		for i := 0; i < 30; i++ {
			start := time.Now()
			if _, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: nss[0], Verb: "watch", Group: all[len(all)-1].gvr.Group, Resource: all[len(all)-1].gvr.Resource}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ssar = append(ssar, time.Since(start))
			start = time.Now()
			rr, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
				Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: nss[0]}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ssrr = append(ssrr, time.Since(start))
			if rr.Status.Incomplete {
				t.Fatalf("rules review incomplete on an RBAC-only server: %+v", rr.Status)
			}
		}
		line := fmt.Sprintf("one SelfSubjectAccessReview %v, one SelfSubjectRulesReview %v (medians of 30, a user with %d rules in the namespace)",
			median(ssar).Round(10*time.Microsecond), median(ssrr).Round(10*time.Microsecond), len(rules(true)))
		t.Log(line)
		report = append(report, line)
	}
	for _, u := range users {
		var off, on []time.Duration
		var last sample
		for run := 0; run < runs; run++ {
			// Alternate the order so a drifting machine skews neither.
			first, second := false, true
			if run%2 == 1 {
				first, second = true, false
			}
			a, b := measure(u, first), measure(u, second)
			if first {
				a, b = b, a
			}
			off, on = append(off, a.synced), append(on, b.synced)
			last = b
		}
		n := accessStartResources
		if u.namespaces != nil {
			n = 0
			for _, r := range all {
				if r.namespaced {
					n++
				}
			}
		}
		mOff, mOn := median(off), median(on)
		line := fmt.Sprintf("%s, %d informers: all synced after %v without the check, %v with it (%.2f×); the check sent %d SelfSubjectAccessReviews and %d SelfSubjectRulesReviews",
			u.name, n, mOff.Round(time.Millisecond), mOn.Round(time.Millisecond), float64(mOn)/float64(mOff), last.ssar, last.ssrr)
		t.Log(line)
		report = append(report, line)
		switch {
		case u.namespaces == nil && u.cfg().Impersonate.UserName == "":
			// Admin: the check is answered for every resource at once.
			if last.ssar+last.ssrr > 10 {
				t.Errorf("%s: %d reviews for %d resources; want a few for all of them", u.name, last.ssar+last.ssrr, n)
			}
		case u.namespaces == nil:
			// A ClusterRole without wildcards: the one rules review of
			// all namespaces answers for every resource.
			if last.ssar != 0 || last.ssrr > 3 {
				t.Errorf("%s: %d access and %d rules reviews for %d resources in all namespaces; want one rules review for all of them",
					u.name, last.ssar, last.ssrr, n)
			}
		case u.namespaces != nil:
			// Namespaced: one rules review per namespace answers for every resource.
			if last.ssar != 0 || last.ssrr > 3*len(u.namespaces) {
				t.Errorf("%s: %d access and %d rules reviews for %d resources in %d namespaces; want only rules reviews, about one per namespace",
					u.name, last.ssar, last.ssrr, n, len(u.namespaces))
			}
		}
	}
	sc.Injected("%d resources (%d built-in, the rest CRDs), client-go's default request budget (QPS 5, burst 10); factories with and without WithAccessCheck, medians of %d runs", accessStartResources, builtin, runs)
	sc.Held("%s", strings.Join(report, "; "))
}
