package resolvertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/test/controlplane"
	"github.com/informerkit/informerkit/test/crds"
)

const testGroup = "resolvertest.example.com"

var (
	fixturesOnce sync.Once
	fixturesErr  error
)

// installFixtures installs, once per package, the CRDs the reference table
// uses: a CRD with short names, categories and two versions; the project's
// edge.example.com CRDs from test/crds (short names, a shared category, a
// cluster-scoped kind, a storage version that is not the preferred one, an
// unserved version, a ~680 KB schema); two CRDs in different groups that
// share plural, kind and short name; and a look-alike of Istio's Gateway
// that collides with edge.example.com's, as Istio's and Gateway API's
// collide in real clusters.
func installFixtures(t *testing.T) {
	t.Helper()
	fixturesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		own := []*apiextensionsv1.CustomResourceDefinition{
			controlplane.NewCRD("stable."+testGroup, "CronTab", "crontabs",
				controlplane.ShortNames("ct"), controlplane.Categories("all", "resolvertest"),
				controlplane.Versions("v1", "v1beta1")),
			controlplane.NewCRD("a."+testGroup, "Widget", "widgets", controlplane.ShortNames("wd")),
			controlplane.NewCRD("b."+testGroup, "Widget", "widgets", controlplane.ShortNames("wd"), controlplane.ClusterScoped()),
			controlplane.NewCRD("networking.istio."+testGroup, "Gateway", "gateways"),
		}
		for _, crd := range own {
			if fixturesErr = cp.InstallCRD(ctx, crd); fixturesErr != nil {
				return
			}
		}
		for _, file := range []string{crds.Edge, crds.EdgeProxy} {
			data, err := crds.YAML(file)
			if err != nil {
				fixturesErr = err
				return
			}
			if _, fixturesErr = cp.InstallCRDYAML(ctx, data); fixturesErr != nil {
				return
			}
		}
		fixturesErr = waitResolvable(ctx, "crontabs.stable."+testGroup, "widgets.a."+testGroup, "widgets.b."+testGroup,
			"gateways.networking.istio."+testGroup, "gateways."+crds.Group, "gatewayclasses."+crds.Group,
			"routes."+crds.Group, "backendgrants."+crds.Group, "edgeproxies."+crds.Group)
	})
	if fixturesErr != nil {
		t.Fatalf("install fixtures: %v", fixturesErr)
	}
}

// waitResolvable waits until a fresh resolver resolves every reference:
// InstallCRD waits for the per-group-version discovery endpoints, and the
// aggregated document can lag a little behind them.
func waitResolvable(ctx context.Context, refs ...string) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		return err
	}
	r := discoveryresolver.New(disc)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r.Invalidate()
		for _, ref := range refs {
			if _, err := r.Resolve(ctx, ref); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// refCase is one reference and the resource it must resolve to.
type refCase struct {
	ref  string
	want schema.GroupVersionResource
}

// checkReferences resolves each reference and checks the answer twice:
// against the expected resource, and against kubectl's mapping of the same
// string (kubectlArbitrary lists the references kubectl maps to one of
// several resources from one run to the next).
func checkReferences(t *testing.T, r *discoveryresolver.Resolver, kubectl func(string) (schema.GroupVersionResource, error),
	cases []refCase, kubectlArbitrary map[string][]schema.GroupVersionResource) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := r.Resolve(ctx, tc.ref)
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.ref, err)
			}
			if got.GVR != tc.want {
				t.Fatalf("Resolve(%q) = %v, want %v", tc.ref, got.GVR, tc.want)
			}
			k, err := kubectl(tc.ref)
			if alts, ok := kubectlArbitrary[tc.ref]; ok {
				if err != nil || !slices.Contains(alts, k) {
					t.Fatalf("kubectl maps %q to %v (err %v), want one of %v", tc.ref, k, err, alts)
				}
				return
			}
			if err != nil || k != got.GVR {
				t.Fatalf("kubectl maps %q to %v (err %v); the resolver to %v", tc.ref, k, err, got.GVR)
			}
		})
	}
}

func newResolver(t *testing.T, opts ...discoveryresolver.Option) (*discoveryresolver.Resolver, *controlplane.RequestCounter) {
	t.Helper()
	cfg, counter := controlplane.CountRequests(cp.Config())
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return discoveryresolver.New(disc, opts...), counter
}

func gvr(g, v, r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

// TestReferenceForms resolves every form of reference kubectl accepts and
// checks each answer twice: against the expected resource, and against what
// kubectl's own RESTMapper stack (a ShortcutExpander over a
// DeferredDiscoveryRESTMapper, driven the way cli-runtime's Builder drives
// it) answers for the same string on the same server.
func TestReferenceForms(t *testing.T) {
	installFixtures(t)
	ctx := context.Background()
	r, _ := newResolver(t)
	kubectl := newKubectlMapper(t)

	pods := gvr("", "v1", "pods")
	deploy := gvr("apps", "v1", "deployments")
	coreEvents := gvr("", "v1", "events")
	ct := gvr("stable."+testGroup, "v1", "crontabs")
	edge := crds.Group
	egw := gvr(edge, "v1", "gateways")
	routes := gvr(edge, "v1", "routes")
	// kubectl expands a short name that several groups share in the order of
	// the resource lists discovery returns; with aggregated discovery that
	// order comes from a map, so kubectl answers "ev" with either group from
	// one run to the next (seen here). The resolver's answer is the core
	// group's, as for "events" and "Event".
	kubectlArbitrary := map[string][]schema.GroupVersionResource{
		"ev": {coreEvents, gvr("events.k8s.io", "v1", "events")},
	}

	checkReferences(t, r, kubectl, []refCase{
		{"pods", pods}, {"pod", pods}, {"po", pods}, {"Pod", pods}, {"PODS", pods}, {"pods.v1.", pods}, {"Pod.v1.", pods},
		{"deployments", deploy}, {"deployment", deploy}, {"deploy", deploy}, {"Deployment", deploy},
		{"deployments.apps", deploy}, {"deploy.apps", deploy}, {"Deployment.apps", deploy}, {"deployment.apps", deploy},
		{"deployments.v1.apps", deploy}, {"Deployment.v1.apps", deploy}, {"deploy.v1.apps", deploy},
		// core wins over events.k8s.io, as kubectl's priority says
		{"events", coreEvents}, {"event", coreEvents}, {"ev", coreEvents}, {"Event", coreEvents},
		{"events.events.k8s.io", gvr("events.k8s.io", "v1", "events")},
		{"Event.events.k8s.io", gvr("events.k8s.io", "v1", "events")},
		{"ev.events.k8s.io", gvr("events.k8s.io", "v1", "events")},
		// preferred versions, and explicit ones
		{"hpa", gvr("autoscaling", "v2", "horizontalpodautoscalers")},
		{"horizontalpodautoscalers.v1.autoscaling", gvr("autoscaling", "v1", "horizontalpodautoscalers")},
		{"cj", gvr("batch", "v1", "cronjobs")}, {"CronJob.batch", gvr("batch", "v1", "cronjobs")},
		{"svc", gvr("", "v1", "services")}, {"ns", gvr("", "v1", "namespaces")}, {"no", gvr("", "v1", "nodes")},
		{"cm", gvr("", "v1", "configmaps")}, {"sa", gvr("", "v1", "serviceaccounts")}, {"pvc", gvr("", "v1", "persistentvolumeclaims")},
		{"sts", gvr("apps", "v1", "statefulsets")}, {"ds", gvr("apps", "v1", "daemonsets")}, {"rs", gvr("apps", "v1", "replicasets")},
		{"ing", gvr("networking.k8s.io", "v1", "ingresses")}, {"netpol", gvr("networking.k8s.io", "v1", "networkpolicies")},
		{"crd", gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")},
		{"customresourcedefinitions.apiextensions.k8s.io", gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")},
		{"pdb", gvr("policy", "v1", "poddisruptionbudgets")}, {"pc", gvr("scheduling.k8s.io", "v1", "priorityclasses")},
		{"sc", gvr("storage.k8s.io", "v1", "storageclasses")}, {"leases", gvr("coordination.k8s.io", "v1", "leases")},
		{"clusterroles", gvr("rbac.authorization.k8s.io", "v1", "clusterroles")},
		// a CRD with short names, categories and two versions
		{"ct", ct}, {"crontab", ct}, {"crontabs", ct}, {"CronTab", ct},
		{"crontabs.stable." + testGroup, ct}, {"ct.stable." + testGroup, ct}, {"CronTab.stable." + testGroup, ct},
		{"crontabs.v1beta1.stable." + testGroup, gvr("stable."+testGroup, "v1beta1", "crontabs")},
		{"CronTab.v1beta1.stable." + testGroup, gvr("stable."+testGroup, "v1beta1", "crontabs")},
		// the project's edge.example.com CRDs (test/crds)
		{"egw", egw}, {"gateways." + edge, egw}, {"Gateway." + edge, egw}, {"egw." + edge, egw},
		{"egc", gvr(edge, "v1", "gatewayclasses")}, {"GatewayClass", gvr(edge, "v1", "gatewayclasses")},
		{"route", routes}, {"Route", routes}, {"ert", routes},
		{"Route.v1beta1." + edge, gvr(edge, "v1beta1", "routes")},
		{"eprx", gvr(edge, "v1", "edgeproxies")}, {"EdgeProxy", gvr(edge, "v1", "edgeproxies")},
		{"edgeproxies.v1alpha1." + edge, gvr(edge, "v1alpha1", "edgeproxies")},
		// preferred (v1) even though v1beta1 is the storage version
		{"ebg", gvr(edge, "v1", "backendgrants")}, {"BackendGrant", gvr(edge, "v1", "backendgrants")},
		{"backendgrants.v1beta1." + edge, gvr(edge, "v1beta1", "backendgrants")},
		// the colliding groups, qualified
		{"widgets.a." + testGroup, gvr("a."+testGroup, "v1", "widgets")},
		{"wd.b." + testGroup, gvr("b."+testGroup, "v1", "widgets")},
		{"Widget.v1.b." + testGroup, gvr("b."+testGroup, "v1", "widgets")},
		{"gateways.networking.istio." + testGroup, gvr("networking.istio."+testGroup, "v1", "gateways")},
	}, kubectlArbitrary)

	// The Resource describes the CRD fully.
	got, err := r.Resolve(ctx, "ct")
	if err != nil {
		t.Fatal(err)
	}
	if got.GVK.Kind != "CronTab" || !got.Namespaced || !slices.Equal(got.ShortNames, []string{"ct"}) ||
		!slices.Equal(got.Categories, []string{"all", "resolvertest"}) || !got.Watchable() {
		t.Fatalf("Resolve(ct) = %+v", got)
	}
	if wb, err := r.Resolve(ctx, "widgets.b."+testGroup); err != nil || wb.Namespaced {
		t.Fatalf("cluster-scoped widgets: %+v, %v", wb, err)
	}
}

// TestReferenceErrors checks the typed errors, and that kubectl too refuses
// (or, for ambiguity, only picks by group order) where the resolver does.
func TestReferenceErrors(t *testing.T) {
	installFixtures(t)
	ctx := context.Background()
	r, _ := newResolver(t)
	kubectl := newKubectlMapper(t)

	for _, tc := range []struct {
		ref  string
		want error
	}{
		{"pods/status", discoveryresolver.ErrSubresource},
		{"deployments/scale", discoveryresolver.ErrSubresource},
		{"bindings", discoveryresolver.ErrNotWatchable},
		{"tokenreviews", discoveryresolver.ErrNotWatchable},
		{"selfsubjectaccessreviews.authorization.k8s.io", discoveryresolver.ErrNotWatchable},
		{"nosuchresource", discoveryresolver.ErrNotFound},
		{"pods.apps", discoveryresolver.ErrNotFound},
		{"deployments.v2.apps", discoveryresolver.ErrNotFound},
		{"crontabs.v9.stable." + testGroup, discoveryresolver.ErrNotFound},
		// declared in the CRD, but not served
		{"routes.v1alpha2." + crds.Group, discoveryresolver.ErrNotFound},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			res, err := r.Resolve(ctx, tc.ref)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Resolve(%q) = %v, want %v", tc.ref, err, tc.want)
			}
			var re *discoveryresolver.ResolveError
			if !errors.As(err, &re) || re.Ref != tc.ref {
				t.Fatalf("%v is not a *ResolveError naming %q", err, tc.ref)
			}
			switch tc.want {
			case discoveryresolver.ErrNotWatchable:
				// kubectl knows the resource too; it just cannot be watched.
				if k, kerr := kubectl(tc.ref); kerr != nil || k != res.GVR {
					t.Fatalf("kubectl: %v, %v; resolver returned %v", k, kerr, res.GVR)
				}
			case discoveryresolver.ErrNotFound:
				if k, kerr := kubectl(tc.ref); kerr == nil {
					t.Fatalf("kubectl resolves %q to %v", tc.ref, k)
				}
			}
		})
	}

	for _, tc := range []struct {
		ref    string
		groups []string
		// kubectl expands a short name shared by several groups by the
		// order of the resource lists discovery returns, which with
		// aggregated discovery comes from a map: its pick is arbitrary
		// (seen here: a run picked b.*, the server lists a.* first).
		kubectlArbitrary bool
	}{
		{"widgets", []string{"a." + testGroup, "b." + testGroup}, false},
		{"wd", []string{"a." + testGroup, "b." + testGroup}, true},
		{"Widget", []string{"a." + testGroup, "b." + testGroup}, false},
		{"gateways", []string{crds.Group, "networking.istio." + testGroup}, false},
		{"Gateway", []string{crds.Group, "networking.istio." + testGroup}, false},
	} {
		t.Run("ambiguous/"+tc.ref, func(t *testing.T) {
			_, err := r.Resolve(ctx, tc.ref)
			var ae *discoveryresolver.AmbiguousError
			if !errors.As(err, &ae) {
				t.Fatalf("Resolve(%q) = %v, want *AmbiguousError", tc.ref, err)
			}
			var groups []string
			for _, c := range ae.Candidates {
				groups = append(groups, c.GVR.Group)
			}
			slices.Sort(groups)
			if !slices.Equal(groups, tc.groups) {
				t.Fatalf("candidates %v, want %v", groups, tc.groups)
			}
			// kubectl does not refuse here: it silently takes the group the
			// server lists first (a warning at most for short names). The
			// resolver refuses by default; WithServerGroupOrder gives
			// kubectl's choice.
			k, kerr := kubectl(tc.ref)
			if kerr != nil || !slices.Contains(tc.groups, k.Group) {
				t.Fatalf("kubectl: %v, %v", k, kerr)
			}
			kr, _ := newResolver(t, discoveryresolver.WithServerGroupOrder())
			got, err := kr.Resolve(ctx, tc.ref)
			if err != nil || got.GVR.Group != ae.Candidates[0].GVR.Group {
				t.Fatalf("WithServerGroupOrder: Resolve(%q) = %v, %v; want the group the server lists first, %s",
					tc.ref, got.GVR, err, ae.Candidates[0].GVR.Group)
			}
			if !tc.kubectlArbitrary && got.GVR != k {
				t.Fatalf("WithServerGroupOrder: Resolve(%q) = %v; kubectl says %v", tc.ref, got.GVR, k)
			}
		})
	}
}

// newKubectlMapper returns kubectl's mapping of a type argument, built from
// client-go's RESTMapper stack the way k8s.io/cli-runtime's Builder uses
// it (Builder.mappingFor).
func newKubectlMapper(t *testing.T) func(arg string) (schema.GroupVersionResource, error) {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(string) {})
	return func(arg string) (schema.GroupVersionResource, error) {
		fullySpecifiedGVR, groupResource := schema.ParseResourceArg(arg)
		gvk := schema.GroupVersionKind{}
		if fullySpecifiedGVR != nil {
			gvk, _ = mapper.KindFor(*fullySpecifiedGVR)
		}
		if gvk.Empty() {
			gvk, _ = mapper.KindFor(groupResource.WithVersion(""))
		}
		if !gvk.Empty() {
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return schema.GroupVersionResource{}, err
			}
			return m.Resource, nil
		}
		fullySpecifiedGVK, groupKind := schema.ParseKindArg(arg)
		if fullySpecifiedGVK == nil {
			gvk := groupKind.WithVersion("")
			fullySpecifiedGVK = &gvk
		}
		if !fullySpecifiedGVK.Empty() {
			if m, err := mapper.RESTMapping(fullySpecifiedGVK.GroupKind(), fullySpecifiedGVK.Version); err == nil {
				return m.Resource, nil
			}
		}
		m, err := mapper.RESTMapping(groupKind, gvk.Version)
		if err != nil {
			return schema.GroupVersionResource{}, err
		}
		return m.Resource, nil
	}
}

func TestMatchCategories(t *testing.T) {
	installFixtures(t)
	r, _ := newResolver(t)
	got, err := r.Match(context.Background(), discoveryresolver.Filter{Categories: []string{"edge"}, Verbs: []string{"list", "watch"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got {
		names = append(names, x.GVR.String())
	}
	slices.Sort(names)
	// One entry per resource, at its preferred version (v1 for
	// backendgrants, stored at v1beta1).
	want := []string{
		"edge.example.com/v1, Resource=backendgrants", "edge.example.com/v1, Resource=edgeproxies",
		"edge.example.com/v1, Resource=gatewayclasses", "edge.example.com/v1, Resource=gateways",
		"edge.example.com/v1, Resource=routes",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("Match(category edge) = %v, want %v", names, want)
	}
	all, err := r.Match(context.Background(), discoveryresolver.Filter{Categories: []string{"all"}})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, x := range all {
		found = append(found, x.GVR.Resource)
	}
	for _, w := range []string{"pods", "services", "deployments", "crontabs"} {
		if !slices.Contains(found, w) {
			t.Errorf("category all lacks %s: %v", w, found)
		}
	}
}

// TestCRDLifecycle: a CRD installed after the first resolution is found on
// the next miss; once deleted, it is reported ErrNotFound after a refresh,
// and OnChange reports both.
func TestCRDLifecycle(t *testing.T) {
	ctx := context.Background()
	r, _ := newResolver(t, discoveryresolver.WithMinRefreshInterval(50*time.Millisecond))
	var mu sync.Mutex
	var changes []discoveryresolver.Change
	defer r.OnChange(func(c discoveryresolver.Change) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	})()
	if _, err := r.Resolve(ctx, "pods"); err != nil {
		t.Fatal(err)
	}
	crd := controlplane.NewCRD("late."+testGroup, "LateThing", "latethings", controlplane.ShortNames("lth"), controlplane.Versions("v1", "v2"))
	if _, err := r.Resolve(ctx, "lth"); !errors.Is(err, discoveryresolver.ErrNotFound) {
		t.Fatalf("before install: %v", err)
	}
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// Misses alone (no Refresh, no invalidation) find it once the interval has
	// passed; the poll only covers the aggregated document's lag.
	var got discoveryresolver.Resource
	err := wait.PollUntilContextTimeout(ctx, 60*time.Millisecond, 20*time.Second, false, func(ctx context.Context) (bool, error) {
		var err error
		got, err = r.Resolve(ctx, "lth")
		return err == nil, nil
	})
	// v2 is preferred: the server ranks v2 above v1.
	if err != nil || got.GVR != gvr("late."+testGroup, "v2", "latethings") {
		t.Fatalf("after install: Resolve(lth) = %v, %v", got.GVR, err)
	}
	if err := cp.DeleteCRD(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := r.Refresh(ctx); err != nil {
			return false, err
		}
		_, err := r.Resolve(ctx, "lth")
		return errors.Is(err, discoveryresolver.ErrNotFound), nil
	})
	if err != nil {
		t.Fatalf("after delete and refresh: Resolve(lth) still answers: %v", err)
	}
	if _, ok := r.Lookup(gvr("late."+testGroup, "v1", "latethings")); ok {
		t.Fatal("Lookup still finds the deleted CRD")
	}
	mu.Lock()
	defer mu.Unlock()
	var added, removed []string
	for _, c := range changes[1:] { // changes[0] is the first round: everything
		for _, x := range c.Added {
			if x.GVR.Group == "late."+testGroup {
				added = append(added, x.GVR.Version)
			}
		}
		for _, x := range c.Removed {
			if x.GVR.Group == "late."+testGroup {
				removed = append(removed, x.GVR.Version)
			}
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	if !slices.Equal(added, []string{"v1", "v2"}) || !slices.Equal(removed, []string{"v1", "v2"}) {
		t.Fatalf("OnChange saw added %v, removed %v; want both versions each", added, removed)
	}
}

// TestMissCost counts requests: one discovery round is two requests
// (aggregated discovery), concurrent misses share rounds, and a loop of
// misses costs one round per minimum refresh interval.
func TestMissCost(t *testing.T) {
	ctx := context.Background()

	t.Run("concurrent misses share rounds", func(t *testing.T) {
		r, counter := newResolver(t, discoveryresolver.WithMinRefreshInterval(0))
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		perRound := counter.Count("discovery", "")
		t.Logf("one discovery round: %d requests %v", perRound, counter.Keys())
		if perRound == 0 || perRound > 2 {
			t.Fatalf("one round sent %d discovery requests (%v); want 1-2 with aggregated discovery", perRound, counter.Keys())
		}
		counter.Reset()
		// Hold the round on the wire so that every miss arrives while it
		// is in flight.
		cp.Proxy().SetStalled(true)
		stalled := true
		defer func() {
			if stalled {
				cp.Proxy().SetStalled(false)
			}
		}()
		const n = 50
		var wg sync.WaitGroup
		errs := make(chan error, n)
		started := make(chan struct{}, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				_, err := r.Resolve(ctx, "nosuchresource")
				if !errors.Is(err, discoveryresolver.ErrNotFound) {
					errs <- fmt.Errorf("Resolve = %v, want ErrNotFound", err)
				}
			}()
		}
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return counter.Count("discovery", "") >= 1, nil
		}); err != nil {
			t.Fatal("no discovery request was sent")
		}
		for i := 0; i < n; i++ {
			<-started
		}
		time.Sleep(500 * time.Millisecond) // let every caller reach the shared round
		cp.Proxy().SetStalled(false)
		stalled = false
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// A miss is answered by a round that started after it: misses that
		// reached the resolver before the held round started share it, and
		// any that came after share one more.
		got := counter.Count("discovery", "")
		t.Logf("%d concurrent misses sent %d discovery requests (one round is %d)", n, got, perRound)
		if got > 2*perRound {
			t.Fatalf("%d concurrent misses sent %d discovery requests (%v); want at most two rounds (%d)", n, got, counter.Keys(), 2*perRound)
		}
	})

	t.Run("repeated misses are rate-limited", func(t *testing.T) {
		r, counter := newResolver(t, discoveryresolver.WithMinRefreshInterval(time.Second))
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		perRound := counter.Count("discovery", "")
		counter.Reset()
		// Each miss waits for a round that starts after it, at least the
		// interval after the previous one: a loop of misses costs one
		// round per interval.
		start := time.Now()
		misses := 0
		for time.Since(start) < 3*time.Second {
			if _, err := r.Resolve(ctx, "typo"); !errors.Is(err, discoveryresolver.ErrNotFound) {
				t.Fatal(err)
			}
			misses++
		}
		elapsed := time.Since(start)
		got := counter.Count("discovery", "")
		t.Logf("%d misses in a loop for %v sent %d discovery requests (one round is %d)", misses, elapsed.Round(time.Millisecond), got, perRound)
		if most := perRound * (int(elapsed/time.Second) + 1); got > most {
			t.Fatalf("%d misses in %v sent %d discovery requests, want at most %d (one round per interval)", misses, elapsed, got, most)
		}
		if got < perRound {
			t.Fatalf("%d misses in %v ran no discovery round", misses, elapsed)
		}
		// Known names never cost a request.
		counter.Reset()
		for i := 0; i < 1000; i++ {
			if _, err := r.Resolve(ctx, "deploy"); err != nil {
				t.Fatal(err)
			}
		}
		if got := len(counter.Keys()); got != 0 {
			t.Fatalf("resolving a known name sent requests: %v", counter.Keys())
		}
	})
}

// TestPartialDiscoveryFailure registers an aggregated API whose backing
// service does not exist: discovery of that group fails, everything else
// keeps resolving, and the failed group is reported.
func TestPartialDiscoveryFailure(t *testing.T) {
	installFixtures(t)
	ctx := context.Background()
	apiservices := cp.Dynamic().Resource(gvr("apiregistration.k8s.io", "v1", "apiservices"))
	broken := schema.GroupVersion{Group: "broken." + testGroup, Version: "v1alpha1"}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": broken.Version + "." + broken.Group},
		"spec": map[string]any{
			"group": broken.Group, "version": broken.Version,
			"service":               map[string]any{"namespace": "default", "name": "does-not-exist", "port": int64(443)},
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	if _, err := apiservices.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = apiservices.Delete(ctx, svc.GetName(), metav1.DeleteOptions{}) }()

	for _, mode := range []string{"legacy", "aggregated"} {
		t.Run(mode, func(t *testing.T) {
			disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
			if err != nil {
				t.Fatal(err)
			}
			var client discovery.DiscoveryInterface = disc
			if mode == "legacy" {
				client = disc.WithLegacy()
			}
			r := discoveryresolver.New(client)
			// The aggregator may need a moment to list the new group.
			var refreshErr error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				refreshErr = r.Refresh(ctx)
				return refreshErr != nil, nil
			})
			for _, ref := range []string{"pods", "deploy", "ct", "egw"} {
				if _, err := r.Resolve(ctx, ref); err != nil {
					t.Errorf("Resolve(%q) during partial failure: %v", ref, err)
				}
			}
			var gde *discoveryresolver.GroupDiscoveryError
			// Legacy discovery gets a 503 for the group-version; aggregated
			// discovery lists it as stale. Both are reported.
			if !errors.As(refreshErr, &gde) {
				t.Fatalf("Refresh = %v, want *GroupDiscoveryError", refreshErr)
			}
			if _, ok := gde.Groups[broken]; !ok {
				t.Fatalf("failed groups %v lack %v", gde.Groups, broken)
			}
			if _, ok := r.FailedGroups()[broken]; !ok {
				t.Fatalf("FailedGroups() = %v, lacks %v", r.FailedGroups(), broken)
			}
			_, err = r.Resolve(ctx, "nosuchresource")
			if !errors.Is(err, discoveryresolver.ErrNotFound) || !errors.As(err, &gde) {
				t.Fatalf("miss = %v, want ErrNotFound and *GroupDiscoveryError", err)
			}
		})
	}
}

// TestCorpusGatewayAPI resolves Gateway API's published CRDs, from the
// optional third-party corpus ($INFORMERKIT_TESTDATA): real short names
// and categories, a storage version that is not the preferred one, and
// kinds that collide with edge.example.com's and the Istio look-alike's.
// It removes them again at the end.
func TestCorpusGatewayAPI(t *testing.T) {
	installFixtures(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const gwAPI = "gateway.networking.k8s.io"
	var files [][]byte
	for _, name := range []string{"gateways", "gatewayclasses", "httproutes", "referencegrants"} {
		files = append(files, crds.ReadCorpus(t, "crds/gateway-api/standard/"+gwAPI+"_"+name+".yaml"))
	}
	var installed []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, name := range installed {
			if err := cp.DeleteCRD(ctx, name); err != nil {
				t.Errorf("delete %s: %v", name, err)
			}
		}
		// Leave discovery as the other tests expect it (the aggregated
		// document can lag behind the deletions).
		disc, err := discovery.NewDiscoveryClientForConfig(cp.Config())
		if err != nil {
			t.Error(err)
			return
		}
		r := discoveryresolver.New(disc)
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			r.Invalidate()
			for _, name := range installed {
				if _, err := r.Resolve(ctx, name); !errors.Is(err, discoveryresolver.ErrNotFound) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("Gateway API CRDs still in discovery after their deletion: %v", err)
		}
	})
	for _, data := range files {
		crdsIn, err := cp.InstallCRDYAML(ctx, data)
		for _, crd := range crdsIn {
			installed = append(installed, crd.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := waitResolvable(ctx, installed...); err != nil {
		t.Fatal(err)
	}

	r, _ := newResolver(t)
	gtw := gvr(gwAPI, "v1", "gateways")
	checkReferences(t, r, newKubectlMapper(t), []refCase{
		{"gtw", gtw}, {"gateways." + gwAPI, gtw}, {"Gateway." + gwAPI, gtw}, {"gtw." + gwAPI, gtw},
		{"gc", gvr(gwAPI, "v1", "gatewayclasses")}, {"GatewayClass." + gwAPI, gvr(gwAPI, "v1", "gatewayclasses")},
		{"httproute", gvr(gwAPI, "v1", "httproutes")}, {"HTTPRoute", gvr(gwAPI, "v1", "httproutes")},
		{"HTTPRoute.v1beta1." + gwAPI, gvr(gwAPI, "v1beta1", "httproutes")},
		// preferred (v1) even though v1beta1 is the storage version
		{"refgrant", gvr(gwAPI, "v1", "referencegrants")},
	}, nil)

	for _, tc := range []struct {
		ref    string
		groups []string
	}{
		{"gateways", []string{crds.Group, gwAPI, "networking.istio." + testGroup}},
		{"GatewayClass", []string{crds.Group, gwAPI}},
	} {
		_, err := r.Resolve(ctx, tc.ref)
		var ae *discoveryresolver.AmbiguousError
		if !errors.As(err, &ae) {
			t.Fatalf("Resolve(%q) = %v, want *AmbiguousError", tc.ref, err)
		}
		var groups []string
		for _, c := range ae.Candidates {
			groups = append(groups, c.GVR.Group)
		}
		slices.Sort(groups)
		if !slices.Equal(groups, tc.groups) {
			t.Fatalf("Resolve(%q): candidates %v, want %v", tc.ref, groups, tc.groups)
		}
	}

	got, err := r.Match(ctx, discoveryresolver.Filter{Categories: []string{"gateway-api"}, Verbs: []string{"list", "watch"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got {
		names = append(names, x.GVR.String())
	}
	slices.Sort(names)
	want := []string{
		"gateway.networking.k8s.io/v1, Resource=gatewayclasses", "gateway.networking.k8s.io/v1, Resource=gateways",
		"gateway.networking.k8s.io/v1, Resource=httproutes", "gateway.networking.k8s.io/v1, Resource=referencegrants",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("Match(category gateway-api) = %v, want %v", names, want)
	}
}
