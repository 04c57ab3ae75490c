package discoveryresolver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// cluster is a small but realistic discovery document, in the order a real
// API server lists it.
func cluster() []fakeGroup {
	return []fakeGroup{
		group("",
			version("v1",
				res("pods", "Pod", "po"),
				metav1.APIResource{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get", "patch", "update"}},
				res("events", "Event", "ev"),
				clusterScoped(res("nodes", "Node", "no")),
				withVerbs(res("bindings", "Binding"), "create"),
				res("configmaps", "ConfigMap", "cm"),
			)),
		group("apps",
			version("v1",
				res("deployments", "Deployment", "deploy"),
				metav1.APIResource{Name: "deployments/scale", Group: "autoscaling", Version: "v1", Kind: "Scale", Namespaced: true, Verbs: metav1.Verbs{"get", "patch", "update"}},
			)),
		group("events.k8s.io", version("v1", res("events", "Event", "ev"))),
		group("autoscaling",
			version("v2", res("horizontalpodautoscalers", "HorizontalPodAutoscaler", "hpa")),
			version("v1", res("horizontalpodautoscalers", "HorizontalPodAutoscaler", "hpa"))),
		group("flowcontrol.apiserver.k8s.io",
			version("v1", clusterScoped(res("flowschemas", "FlowSchema"))),
			version("v1beta3", clusterScoped(res("flowschemas", "FlowSchema")), clusterScoped(res("prioritylevelconfigurations", "PriorityLevelConfiguration")))),
		group("stable.example.com",
			version("v1", withCategories(res("crontabs", "CronTab", "ct"), "all", "example")),
			version("v1beta1", withCategories(res("crontabs", "CronTab", "ct"), "all", "example"))),
	}
}

// newTestResolver returns a resolver on a fake clock that jumps ahead when
// the resolver waits, so that a miss runs its round without real waiting.
func newTestResolver(t *testing.T, f *fakeDiscovery, opts ...Option) *Resolver {
	t.Helper()
	clock := &fakeClock{t: time.Unix(1_000_000, 0), auto: true}
	return New(f, append([]Option{withClock(clock)}, opts...)...)
}

func gvr(g, v, r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

func TestResolveReferenceForms(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	ctx := context.Background()
	pods := gvr("", "v1", "pods")
	deploy := gvr("apps", "v1", "deployments")
	coreEvents := gvr("", "v1", "events")
	hpa2 := gvr("autoscaling", "v2", "horizontalpodautoscalers")
	ct := gvr("stable.example.com", "v1", "crontabs")
	for _, tc := range []struct {
		ref  string
		want schema.GroupVersionResource
	}{
		{"pods", pods}, {"pod", pods}, {"po", pods}, {"Pod", pods}, {"POD", pods}, {"pods.v1.", pods}, {"Pod.v1.", pods},
		{"deployments", deploy}, {"deployment", deploy}, {"deploy", deploy}, {"Deployment", deploy},
		{"deployments.apps", deploy}, {"deploy.apps", deploy}, {"Deployment.apps", deploy},
		{"deployments.v1.apps", deploy}, {"Deployment.v1.apps", deploy}, {"deploy.v1.apps", deploy},
		// The core group wins over events.k8s.io, as in kubectl.
		{"events", coreEvents}, {"event", coreEvents}, {"ev", coreEvents}, {"Event", coreEvents},
		{"events.events.k8s.io", gvr("events.k8s.io", "v1", "events")},
		{"Event.v1.events.k8s.io", gvr("events.k8s.io", "v1", "events")},
		// Preferred version (v2 is listed first), or the one asked for.
		{"hpa", hpa2}, {"horizontalpodautoscalers.autoscaling", hpa2},
		{"hpa.v1.autoscaling", gvr("autoscaling", "v1", "horizontalpodautoscalers")},
		// A resource served only in a non-preferred version is still found there.
		{"prioritylevelconfigurations", gvr("flowcontrol.apiserver.k8s.io", "v1beta3", "prioritylevelconfigurations")},
		{"flowschemas", gvr("flowcontrol.apiserver.k8s.io", "v1", "flowschemas")},
		{"ct", ct}, {"crontab", ct}, {"crontabs", ct}, {"CronTab", ct}, {"crontabs.stable.example.com", ct},
		{"ct.stable.example.com", ct}, {"CronTab.stable.example.com", ct},
		{"crontabs.v1beta1.stable.example.com", gvr("stable.example.com", "v1beta1", "crontabs")},
		{"CronTab.v1beta1.stable.example.com", gvr("stable.example.com", "v1beta1", "crontabs")},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := r.Resolve(ctx, tc.ref)
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.ref, err)
			}
			if got.GVR != tc.want {
				t.Fatalf("Resolve(%q) = %v, want %v", tc.ref, got.GVR, tc.want)
			}
		})
	}
}

func TestResolveFillsEveryField(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	got, err := r.Resolve(context.Background(), "ct")
	if err != nil {
		t.Fatal(err)
	}
	want := Resource{
		GVR:        gvr("stable.example.com", "v1", "crontabs"),
		GVK:        schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"},
		Namespaced: true,
		Verbs:      []string(watchVerbs),
		ShortNames: []string{"ct"},
		Categories: []string{"all", "example"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	nodes, err := r.Resolve(context.Background(), "no")
	if err != nil || nodes.Namespaced {
		t.Fatalf("nodes: %+v, %v; want cluster-scoped", nodes, err)
	}
}

func TestResolveErrors(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	ctx := context.Background()
	for _, tc := range []struct {
		ref     string
		want    error
		wantRes bool
	}{
		{"pods/status", ErrSubresource, false},
		{"deployments.apps/scale", ErrSubresource, false},
		{"bindings", ErrNotWatchable, true},
		{"nosuchthing", ErrNotFound, false},
		{"", ErrNotFound, false},
		{"pods.v2.", ErrNotFound, false},        // no such version
		{"deployments.v1.", ErrNotFound, false}, // core group asked for explicitly
		{"pods.apps", ErrNotFound, false},
		{"events.k8s.io", ErrNotFound, false}, // a group is not a resource
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := r.Resolve(ctx, tc.ref)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Resolve(%q) error = %v, want %v", tc.ref, err, tc.want)
			}
			var re *ResolveError
			if !errors.As(err, &re) || re.Ref != tc.ref {
				t.Fatalf("error %v is not a *ResolveError naming %q", err, tc.ref)
			}
			if tc.wantRes != (got.GVR.Resource != "") {
				t.Fatalf("Resolve(%q) returned %+v; want resource returned: %v", tc.ref, got, tc.wantRes)
			}
		})
	}
	if _, err := r.ResolveGVR(ctx, gvr("", "v1", "pods/status")); !errors.Is(err, ErrSubresource) {
		t.Fatalf("ResolveGVR(pods/status) = %v, want ErrSubresource", err)
	}
}

func ambiguousCluster() []fakeGroup {
	return []fakeGroup{
		group("", version("v1", res("pods", "Pod", "po"))),
		group("a.example.com", version("v1", res("widgets", "Widget", "wd"), res("gadgets", "Gadget", "gd"))),
		group("b.example.com", version("v1", res("widgets", "Widget", "wd"), res("gizmos", "Gizmo", "gd"))),
		// A short name that is another group's plural: the plural wins, as in kubectl.
		group("c.example.com", version("v1", res("things", "Thing", "gizmos"))),
		// Two resources of one group claiming one short name.
		group("d.example.com", version("v1", res("alphas", "Alpha", "x"), res("betas", "Beta", "x"))),
	}
}

func TestAmbiguous(t *testing.T) {
	r := newTestResolver(t, newFake(ambiguousCluster()...))
	ctx := context.Background()
	for _, tc := range []struct {
		ref  string
		want []string // candidate groups
	}{
		{"widgets", []string{"a.example.com", "b.example.com"}},
		{"wd", []string{"a.example.com", "b.example.com"}},
		{"Widget", []string{"a.example.com", "b.example.com"}},
		{"gd", []string{"a.example.com", "b.example.com"}},
		{"x", []string{"d.example.com", "d.example.com"}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := r.Resolve(ctx, tc.ref)
			var ae *AmbiguousError
			if !errors.As(err, &ae) {
				t.Fatalf("Resolve(%q) = %v, want *AmbiguousError", tc.ref, err)
			}
			var groups []string
			for _, c := range ae.Candidates {
				groups = append(groups, c.GVR.Group)
			}
			if ae.Ref != tc.ref || !slices.Equal(groups, tc.want) {
				t.Fatalf("AmbiguousError{Ref: %q, groups %v}, want %q, %v", ae.Ref, groups, tc.ref, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want[0]) {
				t.Fatalf("message %q does not name the candidates", err)
			}
		})
	}
	// Qualifying with the group settles it; a plural beats a short name.
	for ref, want := range map[string]schema.GroupVersionResource{
		"widgets.b.example.com":   gvr("b.example.com", "v1", "widgets"),
		"wd.a.example.com":        gvr("a.example.com", "v1", "widgets"),
		"Widget.v1.b.example.com": gvr("b.example.com", "v1", "widgets"),
		"gizmos":                  gvr("b.example.com", "v1", "gizmos"),
	} {
		got, err := r.Resolve(ctx, ref)
		if err != nil || got.GVR != want {
			t.Errorf("Resolve(%q) = %v, %v; want %v", ref, got.GVR, err, want)
		}
	}
}

func TestServerGroupOrderSettlesTiesLikeKubectl(t *testing.T) {
	r := newTestResolver(t, newFake(ambiguousCluster()...), WithServerGroupOrder())
	ctx := context.Background()
	for _, ref := range []string{"widgets", "wd", "Widget"} {
		got, err := r.Resolve(ctx, ref)
		if err != nil || got.GVR != gvr("a.example.com", "v1", "widgets") {
			t.Errorf("Resolve(%q) = %v, %v; want the first group's widgets", ref, got.GVR, err)
		}
	}
	// Within one group there is no order to go by.
	var ae *AmbiguousError
	if _, err := r.Resolve(ctx, "x"); !errors.As(err, &ae) {
		t.Errorf("Resolve(x) = %v, want *AmbiguousError", err)
	}
}

func TestResolveGVRAndGVK(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	ctx := context.Background()
	for _, tc := range []struct {
		in   schema.GroupVersionResource
		want schema.GroupVersionResource
	}{
		{gvr("apps", "v1", "deployments"), gvr("apps", "v1", "deployments")},
		{gvr("autoscaling", "", "horizontalpodautoscalers"), gvr("autoscaling", "v2", "horizontalpodautoscalers")},
		{gvr("autoscaling", "v1", "horizontalpodautoscalers"), gvr("autoscaling", "v1", "horizontalpodautoscalers")},
		{gvr("flowcontrol.apiserver.k8s.io", "", "prioritylevelconfigurations"), gvr("flowcontrol.apiserver.k8s.io", "v1beta3", "prioritylevelconfigurations")},
	} {
		got, err := r.ResolveGVR(ctx, tc.in)
		if err != nil || got.GVR != tc.want {
			t.Errorf("ResolveGVR(%v) = %v, %v; want %v", tc.in, got.GVR, err, tc.want)
		}
	}
	if _, err := r.ResolveGVR(ctx, gvr("apps", "v2", "deployments")); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResolveGVR(apps/v2 deployments) = %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		in   schema.GroupVersionKind
		want schema.GroupVersionResource
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, gvr("", "v1", "pods")},
		{schema.GroupVersionKind{Group: "apps", Kind: "Deployment"}, gvr("apps", "v1", "deployments")},
		{schema.GroupVersionKind{Group: "apps", Kind: "deployment"}, gvr("apps", "v1", "deployments")},
		{schema.GroupVersionKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, gvr("autoscaling", "v2", "horizontalpodautoscalers")},
		{schema.GroupVersionKind{Group: "stable.example.com", Version: "v1beta1", Kind: "CronTab"}, gvr("stable.example.com", "v1beta1", "crontabs")},
		{schema.GroupVersionKind{Group: "events.k8s.io", Kind: "Event"}, gvr("events.k8s.io", "v1", "events")},
	} {
		got, err := r.resolveGVK(ctx, tc.in)
		if err != nil || got.GVR != tc.want {
			t.Errorf("resolveGVK(%v) = %v, %v; want %v", tc.in, got.GVR, err, tc.want)
		}
	}
	_, err := r.resolveGVK(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Scale"})
	var re *ResolveError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &re) || re.Ref != "apps/v1, Kind=Scale" {
		t.Errorf("resolveGVK(Scale) = %v, want ErrNotFound naming the GVK (subresource kinds are not resources)", err)
	}
}

func TestKnownNamesAreAnsweredWithoutNetwork(t *testing.T) {
	f := newFake(cluster()...)
	r := newTestResolver(t, f)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		for _, ref := range []string{"pods", "Deployment.apps", "ct", "hpa.v1.autoscaling"} {
			if _, err := r.Resolve(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := r.Lookup(gvr("apps", "v1", "deployments")); !ok {
			t.Fatal("Lookup(deployments) missed")
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d discovery rounds, want 1 (the first resolution)", n)
	}
}

func TestLookupNeverTouchesTheNetwork(t *testing.T) {
	f := newFake(cluster()...)
	r := newTestResolver(t, f)
	if _, ok := r.Lookup(gvr("", "v1", "pods")); ok {
		t.Fatal("Lookup before any round found pods")
	}
	r.Invalidate()
	if _, ok := r.Lookup(gvr("", "v1", "pods")); ok || f.calls.Load() != 0 {
		t.Fatalf("Lookup ran discovery (%d rounds)", f.calls.Load())
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok := r.Lookup(gvr("", "v1", "pods"))
	if !ok || got.GVK.Kind != "Pod" {
		t.Fatalf("Lookup(pods) = %+v, %v", got, ok)
	}
	if _, ok := r.Lookup(gvr("", "v1", "pods/status")); ok {
		t.Fatal("Lookup found a subresource")
	}
}

func TestMissRefreshesAndFindsNewResource(t *testing.T) {
	f := newFake(cluster()...)
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := New(f, withClock(clock))
	ctx := context.Background()
	if _, err := r.Resolve(ctx, "pods"); err != nil {
		t.Fatal(err)
	}
	f.set(append(cluster(), group("late.example.com", version("v1", res("lates", "Late", "lt"))))...)
	clock.advance(2 * time.Second) // past the interval: the miss runs its round at once
	got, err := r.Resolve(ctx, "lt")
	if err != nil || got.GVR != gvr("late.example.com", "v1", "lates") {
		t.Fatalf("Resolve(lt) after install = %v, %v", got.GVR, err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d rounds, want 2", n)
	}
}

// TestMissesAreRateLimited: misses within the minimum refresh interval wait
// for the round the interval allows and share it; the wait is bounded by
// ctx; invalidate lets the next miss through at once; Refresh always runs.
func TestMissesAreRateLimited(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	clock := &fakeClock{t: time.Unix(1_000_000, 0), waiting: make(chan struct{}, 100)}
	r := New(f, withClock(clock), WithMinRefreshInterval(time.Second))
	ctx := context.Background()
	// The first call's own round answers its miss: no wait.
	if _, err := r.Resolve(ctx, "podz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve(podz) = %v, want ErrNotFound", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d rounds, want 1", n)
	}
	f.set(append(cluster(), group("late.example.com", version("v1", res("lates", "Late", "lt"))))...)
	const n = 20
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			got, err := r.Resolve(ctx, "lt")
			if err == nil && got.GVR.Resource != "lates" {
				err = fmt.Errorf("got %v", got.GVR)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		<-clock.waiting // every miss waits for the interval
	}
	clock.advance(999 * time.Millisecond)
	if got := f.calls.Load(); got != 1 || clock.pending() != n {
		t.Fatalf("999ms after the round: %d rounds, %d misses waiting; want 1 round, %d waiting", got, clock.pending(), n)
	}
	select {
	case err := <-errs:
		t.Fatalf("a miss returned inside the interval: %v", err)
	default:
	}
	clock.advance(time.Millisecond)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("waiting miss: %v", err)
		}
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d waiting misses ran %d rounds after the interval, want 1", n, got-1)
	}
	// A wait ends with the caller's ctx: the error says both that the older
	// snapshot does not know the name and why no newer round answered.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := r.Resolve(cctx, "podz"); done <- err }()
	<-clock.waiting
	cancel()
	if err := <-done; !errors.Is(err, ErrNotFound) || !errors.Is(err, context.Canceled) {
		t.Fatalf("miss whose ctx ended while waiting = %v, want ErrNotFound and context.Canceled", err)
	}
	if clock.pending() != 0 || f.calls.Load() != 2 {
		t.Fatalf("after the cancelled wait: %d timers left, %d rounds; want 0, 2", clock.pending(), f.calls.Load())
	}
	// invalidate lets the next miss through at once; Refresh always runs.
	r.Invalidate()
	_, _ = r.Resolve(ctx, "podz")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.calls.Load(); got != 4 {
		t.Fatalf("%d rounds after invalidate+miss and Refresh, want 4", got)
	}
}

func TestZeroIntervalDisablesRateLimit(t *testing.T) {
	f := newFake(cluster()...)
	r := New(f, WithMinRefreshInterval(0))
	for i := 0; i < 3; i++ {
		_, _ = r.Resolve(context.Background(), "podz")
	}
	if n := f.calls.Load(); n != 3 { // the first round answers the first miss, then a round per miss
		t.Fatalf("%d rounds, want 3", n)
	}
}

// TestConcurrentMissesShareOneRound: misses that arrive while a round is in
// flight wait for it but are not answered by it (it started before them, so
// it may predate what they look for); they then share one round, the one
// the minimum refresh interval allows.
func TestConcurrentMissesShareOneRound(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	clock := &fakeClock{t: time.Unix(1_000_000, 0), waiting: make(chan struct{}, 100)}
	r := New(f, withClock(clock), WithMinRefreshInterval(time.Hour))
	ctx := context.Background()
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	<-f.entered
	clock.advance(2 * time.Hour)
	release := f.hold()
	refreshed := make(chan error, 1)
	go func() { refreshed <- r.Refresh(ctx) }()
	<-f.entered // round 2 is in flight and held; it does not serve lt
	const n = 32
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			got, err := r.Resolve(ctx, "lt")
			if err == nil && got.GVR.Resource != "lates" {
				err = fmt.Errorf("got %v", got.GVR)
			}
			errs <- err
		}()
	}
	// lt is installed after round 2 started: only a later round can see it.
	f.set(append(cluster(), group("late.example.com", version("v1", res("lates", "Late", "lt"))))...)
	release()
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		<-clock.waiting // each miss waits for the interval after round 2
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d rounds before the interval passed, want 2", got)
	}
	clock.advance(time.Hour)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.calls.Load(); got != 3 {
		t.Fatalf("%d concurrent misses ran %d rounds after round 2, want 1", n, got-2)
	}
}

func TestRefreshSharesRoundAndSurvivesLeaderCancel(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	r := New(f)
	release := f.hold()
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() { leaderErr <- r.Refresh(leaderCtx) }()
	<-f.entered
	followerErr := make(chan error, 1)
	go func() { followerErr <- r.Refresh(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // let the follower join the held round
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader Refresh = %v, want context.Canceled", err)
	}
	// The follower's context is alive: it runs its own round.
	<-f.entered
	release()
	if err := <-followerErr; err != nil {
		t.Fatalf("follower Refresh = %v", err)
	}
	if _, ok := r.Lookup(gvr("", "v1", "pods")); !ok {
		t.Fatal("no snapshot after the follower's round")
	}
	// A waiter whose own context ends returns at once.
	release = f.hold()
	defer release()
	go func() { _ = r.Refresh(context.Background()) }()
	<-f.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Refresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Refresh = %v, want DeadlineExceeded", err)
	}
	release()
}

func TestInvalidateDropsRemovedResource(t *testing.T) {
	f := newFake(cluster()...)
	r := newTestResolver(t, f)
	ctx := context.Background()
	if _, err := r.Resolve(ctx, "ct"); err != nil {
		t.Fatal(err)
	}
	f.set(cluster()[:5]...) // the CRD group is gone
	if _, err := r.Resolve(ctx, "ct"); err != nil {
		t.Fatalf("before invalidate the cached answer stands: %v", err)
	}
	r.Invalidate()
	if _, err := r.Resolve(ctx, "ct"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve(ct) after removal and invalidate = %v, want ErrNotFound", err)
	}
	if _, ok := r.Lookup(gvr("stable.example.com", "v1", "crontabs")); ok {
		t.Fatal("Lookup still finds the removed resource")
	}
}

func TestPartialDiscoveryFailure(t *testing.T) {
	f := newFake(append(cluster(), group("metrics.k8s.io", version("v1beta1", res("podmetrics", "PodMetrics"))))...)
	r := newTestResolver(t, f)
	ctx := context.Background()
	if _, err := r.Resolve(ctx, "podmetrics"); err != nil {
		t.Fatal(err)
	}
	down := errors.New("the server is currently unable to handle the request")
	metrics := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	f.fail(metrics, down)
	stable := schema.GroupVersion{Group: "stable.example.com", Version: "v1beta1"}
	f.fail(stable, down)

	err := r.Refresh(ctx)
	var gde *GroupDiscoveryError
	if !errors.As(err, &gde) || len(gde.Groups) != 2 || !errors.Is(gde.Groups[metrics], down) {
		t.Fatalf("Refresh = %v, want *GroupDiscoveryError for %v and %v", err, metrics, stable)
	}
	if fg := r.FailedGroups(); len(fg) != 2 || fg[metrics] == nil {
		t.Fatalf("failedGroups = %v", fg)
	}
	// Everything else resolves; the failed group keeps its last known state.
	for ref, want := range map[string]schema.GroupVersionResource{
		"deploy":                              gvr("apps", "v1", "deployments"),
		"podmetrics":                          gvr("metrics.k8s.io", "v1beta1", "podmetrics"),
		"ct":                                  gvr("stable.example.com", "v1", "crontabs"),
		"crontabs.v1beta1.stable.example.com": gvr("stable.example.com", "v1beta1", "crontabs"),
	} {
		got, err := r.Resolve(ctx, ref)
		if err != nil || got.GVR != want {
			t.Errorf("Resolve(%q) = %v, %v; want %v", ref, got.GVR, err, want)
		}
	}
	// A miss says not found, and that a failed group might have had it.
	_, err = r.Resolve(ctx, "nosuch")
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &gde) {
		t.Fatalf("miss during partial failure = %v, want ErrNotFound and *GroupDiscoveryError", err)
	}
	f.heal()
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if fg := r.FailedGroups(); len(fg) != 0 {
		t.Fatalf("failedGroups after recovery = %v", fg)
	}
}

func TestDiscoveryDown(t *testing.T) {
	f := newFake(cluster()...)
	down := errors.New("connection refused")
	f.setErr(down)
	r := newTestResolver(t, f)
	ctx := context.Background()
	_, err := r.Resolve(ctx, "pods")
	if !errors.Is(err, down) || errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve with discovery down = %v, want the discovery error (not ErrNotFound)", err)
	}
	if _, err := r.Resources(ctx); !errors.Is(err, down) {
		t.Fatalf("Resources = %v, want the discovery error", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d rounds against a down server within the interval, want 1", n)
	}
	f.setErr(nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// A later failure keeps the last snapshot.
	f.setErr(down)
	if err := r.Refresh(ctx); !errors.Is(err, down) {
		t.Fatalf("Refresh = %v", err)
	}
	if _, err := r.Resolve(ctx, "pods"); err != nil {
		t.Fatalf("Resolve(pods) with the old snapshot = %v", err)
	}
}

func TestOnChange(t *testing.T) {
	f := newFake(cluster()...)
	r := newTestResolver(t, f)
	ctx := context.Background()
	var mu sync.Mutex
	var got []Change
	remove := r.OnChange(func(c Change) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	})
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil { // nothing changed: no call
		t.Fatal(err)
	}
	groups := cluster()
	groups[5] = group("stable.example.com", version("v1", withCategories(res("crontabs", "CronTab", "ct"), "all", "example")),
		version("v2", res("crontabs", "CronTab", "ct")))
	f.set(groups...)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 2 {
		t.Fatalf("%d changes, want 2", len(got))
	}
	if len(got[0].Added) != 14 || len(got[0].Removed) != 0 { // every GVR of cluster()
		t.Fatalf("first change: %d added, %d removed; want every resource added", len(got[0].Added), len(got[0].Removed))
	}
	c := got[1]
	mu.Unlock()
	if len(c.Added) != 1 || c.Added[0].GVR != gvr("stable.example.com", "v2", "crontabs") ||
		len(c.Removed) != 1 || c.Removed[0].GVR != gvr("stable.example.com", "v1beta1", "crontabs") {
		t.Fatalf("second change = %+v", c)
	}
	remove()
	remove()
	f.set(cluster()...)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("a removed callback was called: %d changes", len(got))
	}
}

func TestOnChangeCallbackMayUseResolver(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	r := newTestResolver(t, f)
	ctx := context.Background()
	var order []int
	var calls int
	r.OnChange(func(c Change) {
		calls++
		order = append(order, len(c.Added))
		if calls == 1 {
			// A round from inside a callback must not deadlock; its change
			// is delivered after this call returns.
			f.set(append(cluster(), group("x.example.com", version("v1", res("xs", "X"))))...)
			if err := r.Refresh(ctx); err != nil {
				t.Error(err)
			}
			if _, err := r.Resolve(ctx, "xs"); err != nil {
				t.Error(err)
			}
		}
	})
	done := make(chan error, 1)
	go func() { done <- r.Refresh(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Refresh from inside OnChange deadlocked")
	}
	if calls != 2 || order[1] != 1 {
		t.Fatalf("calls=%d order=%v, want the nested change delivered second with 1 added", calls, order)
	}
}

func TestReturnedValuesAreCopies(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	ctx := context.Background()
	a, err := r.Resolve(ctx, "ct")
	if err != nil {
		t.Fatal(err)
	}
	a.Verbs[0] = "MUTATED"
	a.ShortNames[0] = "MUTATED"
	a.Categories = append(a.Categories, "MUTATED")
	a.Verbs = append(a.Verbs, "MUTATED") // must not spill into ShortNames
	list, _ := r.Resources(ctx)
	for i := range list {
		list[i].Verbs = nil
		list[i].GVR.Resource = "MUTATED"
	}
	all, _ := r.allVersions(ctx)
	for i := range all {
		if len(all[i].Verbs) > 0 {
			all[i].Verbs[0] = "MUTATED"
		}
	}
	b, err := r.Resolve(ctx, "ct")
	if err != nil {
		t.Fatal(err)
	}
	if b.Verbs[0] != "create" || b.ShortNames[0] != "ct" || len(b.Categories) != 2 {
		t.Fatalf("the cache was mutated through a returned value: %+v", b)
	}
	if a.ShortNames[0] != "MUTATED" {
		t.Fatalf("append to Verbs spilled into ShortNames: %+v", a)
	}
	again, _ := r.Resources(ctx)
	for _, x := range again {
		if x.GVR.Resource == "MUTATED" || len(x.Verbs) == 0 {
			t.Fatalf("Resources returned shared elements: %+v", x)
		}
	}
}

func TestResourcesAndMatch(t *testing.T) {
	r := newTestResolver(t, newFake(cluster()...))
	ctx := context.Background()
	list, err := r.Resources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.GVR.String())
	}
	want := []string{
		"/v1, Resource=pods", "/v1, Resource=events", "/v1, Resource=nodes", "/v1, Resource=bindings", "/v1, Resource=configmaps",
		"apps/v1, Resource=deployments", "events.k8s.io/v1, Resource=events", "autoscaling/v2, Resource=horizontalpodautoscalers",
		"flowcontrol.apiserver.k8s.io/v1, Resource=flowschemas", "flowcontrol.apiserver.k8s.io/v1beta3, Resource=prioritylevelconfigurations",
		"stable.example.com/v1, Resource=crontabs",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("Resources =\n%v\nwant\n%v", names, want)
	}
	all, _ := r.allVersions(ctx)
	if len(all) != len(want)+3 { // hpa v1, flowschemas v1beta3, crontabs v1beta1
		t.Fatalf("allVersions has %d, want %d", len(all), len(want)+3)
	}
	no := false
	for _, tc := range []struct {
		f    Filter
		want []string
	}{
		{Filter{Categories: []string{"example"}}, []string{"crontabs"}},
		{Filter{Groups: []string{"", "apps"}, Verbs: []string{"list", "watch"}, Namespaced: &no}, []string{"nodes"}},
		{Filter{Groups: []string{"apps"}}, []string{"deployments"}},
		{Filter{Verbs: []string{"create"}, Groups: []string{""}}, []string{"pods", "events", "nodes", "bindings", "configmaps"}},
		{Filter{Categories: []string{"nope"}}, nil},
	} {
		got, err := r.Match(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var gotNames []string
		for _, x := range got {
			gotNames = append(gotNames, x.GVR.Resource)
		}
		if !slices.Equal(gotNames, tc.want) {
			t.Errorf("Match(%+v) = %v, want %v", tc.f, gotNames, tc.want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	yes, no := true, false
	pod := Resource{GVR: gvr("", "v1", "pods"), Namespaced: true, Verbs: []string{"get", "list", "watch"}, Categories: []string{"all"}}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Groups: []string{""}}, true},
		{Filter{Groups: []string{"apps"}}, false},
		{Filter{Categories: []string{"x", "all"}}, true},
		{Filter{Categories: []string{"x"}}, false},
		{Filter{Verbs: []string{"list", "watch"}}, true},
		{Filter{Verbs: []string{"list", "create"}}, false},
		{Filter{Namespaced: &yes}, true},
		{Filter{Namespaced: &no}, false},
	} {
		if got := tc.f.matches(pod); got != tc.want {
			t.Errorf("%+v.Matches(pod) = %v, want %v", tc.f, got, tc.want)
		}
	}
}

func TestCachedClientIsInvalidatedEachRound(t *testing.T) {
	f := &cachingFake{fakeDiscovery: newFake(cluster()...)}
	r := New(f)
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.invalidated != 2 {
		t.Fatalf("Invalidate called %d times, want 2", f.invalidated)
	}
}

type cachingFake struct {
	*fakeDiscovery
	invalidated int
}

func (c *cachingFake) Fresh() bool { return true }
func (c *cachingFake) Invalidate() { c.invalidated++ }

// checkNoGoroutineLeak returns a function that fails t if goroutines started
// during the test are still running shortly after it ends (the resolver
// itself starts none).
func checkNoGoroutineLeak(t *testing.T) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

type panickingFake struct {
	*fakeDiscovery
	release chan struct{}
}

func (p *panickingFake) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	p.entered <- struct{}{}
	<-p.release
	panic("broken discovery client")
}

func TestPanickingClientDoesNotStrandWaiters(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	p := &panickingFake{fakeDiscovery: newFake(cluster()...), release: make(chan struct{})}
	r := New(p)
	leader := make(chan any, 1)
	go func() {
		defer func() { leader <- recover() }()
		_ = r.Refresh(context.Background())
	}()
	<-p.entered
	waiter := make(chan error, 1)
	go func() { waiter <- r.Refresh(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	close(p.release)
	if v := <-leader; v == nil {
		t.Fatal("the leader's panic was swallowed")
	}
	select {
	case err := <-waiter:
		// The waiter either saw the leader's failure or ran (and survived
		// the panic of) its own round.
		if err == nil {
			t.Fatal("waiter got no error from a panicking client")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter stranded")
	}
}

// TestInvalidateGroupVersionsReadsOwnEndpoint: the aggregated discovery
// document can lag behind a CRD added to an existing group-version; after
// invalidate(gvs) the resolver reads the group-version's own
// endpoint until the document agrees.
func TestInvalidateGroupVersionsReadsOwnEndpoint(t *testing.T) {
	ctx := context.Background()
	gv := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	f := newFake(group(gv.Group, version("v1", res("gadgets", "Gadget"))))
	r := New(f)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	both := &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{res("gadgets", "Gadget"), res("doohickeys", "Doohickey")}}
	f.setOwn(gv, both)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup(gv.WithResource("doohickeys")); ok {
		t.Fatal("the stale aggregated document alone cannot show the new resource")
	}
	r.Invalidate(gv)
	if _, err := r.Resolve(ctx, "doohickeys"); err != nil {
		t.Fatalf("after invalidate(gv): %v", err)
	}
	// A group-version the aggregated document does not have at all.
	gv2 := schema.GroupVersion{Group: "new.example.com", Version: "v1"}
	f.setOwn(gv2, &metav1.APIResourceList{GroupVersion: gv2.String(), APIResources: []metav1.APIResource{res("widgets", "Widget")}})
	r.Invalidate(gv2)
	if res, err := r.Resolve(ctx, "widgets.new.example.com"); err != nil || res.GVR != gv2.WithResource("widgets") {
		t.Fatalf("new group-version: %v %v", res, err)
	}
	// The aggregated document catches up: gv is no longer read directly.
	f.set(group(gv.Group, version("v1", res("gadgets", "Gadget"), res("doohickeys", "Doohickey"))))
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	direct := r.direct[gv]
	r.mu.Unlock()
	if direct {
		t.Fatal("still reading gv directly after the aggregated document agreed")
	}
	// The group-version's own endpoint says it is gone while the aggregated
	// document still lists it: gone.
	f.setOwn(gv, nil)
	r.Invalidate(gv)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup(gv.WithResource("gadgets")); ok {
		t.Fatal("a group-version its own endpoint calls gone is still served")
	}
}

// A group-version read from its own endpoint (its aggregated entry lags)
// whose own endpoint fails keeps what the last round had: the lagging
// aggregated document does not speak for it, so a resource served a
// moment ago is not removed (a subscription released and restarted its
// informer: crd-watcher's TestE2EItemsBCategoryWaitForCRDs under a CPU
// hog ended with the new resource's informer Syncing with 0 objects). It
// is reported failed for that round.
func TestOwnEndpointFailureKeepsLastAnswer(t *testing.T) {
	ctx := context.Background()
	gv := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	f := newFake(group(gv.Group, version("v1", res("gadgets", "Gadget"))))
	r := New(f)
	var removed []string
	r.OnChange(func(c Change) {
		for _, x := range c.Removed {
			removed = append(removed, x.GVR.Resource)
		}
	})
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	f.setOwn(gv, &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{res("gadgets", "Gadget"), res("doohickeys", "Doohickey")}})
	r.Invalidate(gv)
	if _, err := r.Resolve(ctx, "doohickeys"); err != nil {
		t.Fatalf("after invalidate(gv): %v", err)
	}
	// A group-version only its own endpoint serves, also read directly.
	gv2 := schema.GroupVersion{Group: "stable.example.com", Version: "v2"}
	f.setOwn(gv2, &metav1.APIResourceList{GroupVersion: gv2.String(), APIResources: []metav1.APIResource{res("gizmos", "Gizmo")}})
	r.Invalidate(gv2)
	if _, err := r.ResolveGVR(ctx, gv2.WithResource("gizmos")); err != nil {
		t.Fatalf("after invalidate(gv2): %v", err)
	}
	boom := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	f.setOwnErr(gv, boom)
	f.setOwnErr(gv2, boom)
	err := r.Refresh(ctx)
	var gerr *GroupDiscoveryError
	if !errors.As(err, &gerr) || gerr.Groups[gv] == nil || gerr.Groups[gv2] == nil {
		t.Fatalf("refresh with the own endpoints failing: %v, want a GroupDiscoveryError naming %s and %s", err, gv, gv2)
	}
	for _, want := range []schema.GroupVersionResource{gv.WithResource("doohickeys"), gv.WithResource("gadgets"), gv2.WithResource("gizmos")} {
		if _, ok := r.Lookup(want); !ok {
			t.Errorf("%s is gone after its group-version's own endpoint failed once", want)
		}
	}
	if len(removed) != 0 {
		t.Errorf("OnChange told removals %v", removed)
	}
	// Answering again, it is read as before.
	f.setOwnErr(gv, nil)
	f.setOwnErr(gv2, nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup(gv.WithResource("doohickeys")); !ok || len(r.FailedGroups()) != 0 {
		t.Fatalf("after recovery: doohickeys %v, failed %v", ok, r.FailedGroups())
	}
}
