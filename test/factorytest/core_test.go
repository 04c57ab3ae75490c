package factorytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestLostServerIsReported (issue 20, defect 13; issue 33, item 3): when
// the API server cannot be reached, a synced informer's Status says so
// within 2 s: State Stale (the cache keeps its objects but is no longer
// kept current), its reason the lost contact without a URL, ContactErr
// errors.Is ErrNoContact; when the server is back it is Synced again, the
// error clears, and what changed meanwhile arrives.
func TestLostServerIsReported(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	ns := unique("contact")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvr, _ := installCRD(t, ctx)
	createN(t, ctx, gvr, ns, 3, nil)
	f := newFactory(t, px.Config())
	defer f.Shutdown()
	h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	var changes []dynamicinformer.Status
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	defer f.OnStatusChange(func(s dynamicinformer.Status) {
		<-mu
		changes = append(changes, s)
		mu <- struct{}{}
	})()
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	before := h.Status().LastContact
	if before.IsZero() {
		t.Fatal("LastContact is zero on a synced informer")
	}

	lost := time.Now()
	t.Cleanup(func() { px.SetRefuse(false) })
	px.SetRefuse(true)
	px.CutAll()
	eventually(t, ctx, "Stale", func() bool { return h.Status().State == dynamicinformer.Stale })
	tookLost := time.Since(lost)
	st := h.Status()
	if !errors.Is(st.ContactErr, dynamicinformer.ErrNoContact) || st.Objects != 3 || st.Err != nil {
		t.Fatalf("after losing the server: state %s, %d objects, err %v, ContactErr %v", st.State, st.Objects, st.Err, st.ContactErr)
	}
	if !strings.HasPrefix(st.Reason, "no contact with the API server: ") || strings.Contains(st.Reason, "://") || strings.Contains(st.Reason, px.Config().Host) {
		t.Fatalf("Stale's reason %q: want the lost contact in words, no URL", st.Reason)
	}
	if tookLost > 3*time.Second { // 1.0–1.5 s measured; slack for a loaded machine
		t.Fatalf("Stale %v after the server was lost; want within 3s", tookLost.Round(time.Millisecond))
	}
	t.Logf("Stale %v after the server was lost: %s", tookLost.Round(time.Millisecond), st.Reason)
	if !h.Informer().HasSynced() {
		t.Fatal("HasSynced false while Stale")
	}
	// Created directly (not through the proxy) while the informer is cut off.
	if _, err := dynamic.NewForConfigOrDie(cp.DirectConfig()).Resource(gvr).Namespace(ns).Create(ctx, obj(gvr.GroupVersion().String(), "Widget", ns, "during-outage", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	px.SetRefuse(false)
	eventually(t, ctx, "contact restored", func() bool { return h.Status().ContactErr == nil })
	tookBack := time.Since(restored)
	if st := h.Status(); st.State != dynamicinformer.Synced || st.Reason != "" {
		t.Fatalf("contact restored: state %s, reason %q; want Synced", st.State, st.Reason)
	}
	eventually(t, ctx, "object created during the outage cached", func() bool { return h.Status().Objects == 4 })
	if st := h.Status(); !st.LastContact.After(before) {
		t.Fatalf("LastContact %v did not move past %v", st.LastContact, before)
	}
	<-mu
	var lostN, backN, staleN, syncedN int
	for i, s := range changes {
		if s.ContactErr != nil && (i == 0 || changes[i-1].ContactErr == nil) {
			lostN++
		}
		if s.ContactErr == nil && i > 0 && changes[i-1].ContactErr != nil {
			backN++
		}
		if i > 0 && changes[i-1].State == dynamicinformer.Synced && s.State == dynamicinformer.Stale {
			staleN++
		}
		if i > 0 && changes[i-1].State == dynamicinformer.Stale && s.State == dynamicinformer.Synced {
			syncedN++
		}
		if s.State == dynamicinformer.Synced && s.ContactErr != nil || s.State == dynamicinformer.Stale && s.ContactErr == nil {
			t.Errorf("change %d: state %s with ContactErr %v", i, s.State, s.ContactErr)
		}
	}
	mu <- struct{}{}
	if lostN != 1 || backN != 1 || staleN != 1 || syncedN != 1 {
		t.Fatalf("OnStatusChange reported contact lost %d times and restored %d times, Synced → Stale %d and Stale → Synced %d times; want once each", lostN, backN, staleN, syncedN)
	}
	sc.Injected("the API server refused every connection (proxy) for a synced CRD informer, an object created meanwhile, then the server reachable again")
	sc.Held("Stale (ContactErr ErrNoContact, reason %q) %v after the server was lost, its 3 objects kept; Synced again and ContactErr cleared %v after it was back, the object created meanwhile arrived; each transition notified once",
		st.Reason,
		tookLost.Round(10*time.Millisecond), tookBack.Round(10*time.Millisecond))
}

// TestLostServerIsReportedByClientFactory (issue 28): a factory built on
// a client (NewSharedInformerFactory), which cannot see the transport,
// reports a stopped API server in Status within seconds too (ContactErr,
// errors.Is ErrNoContact; State Stale), though client-go's REST
// client retries the watch for 10 s and then hands back an empty watch
// instead of an error; the error clears when the server is back, and
// what changed meanwhile arrives.
func TestLostServerIsReportedByClientFactory(t *testing.T) {
	// Not parallel: it stops and starts the shared API server.
	ctx := ctxT(t, 4*time.Minute)
	sc := scenario(t)
	ns := unique("clientcontact")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvr, _ := installCRD(t, ctx)
	createN(t, ctx, gvr, ns, 3, nil)
	f := dynamicinformer.NewSharedInformerFactory(dynamic.NewForConfigOrDie(cp.Config()), dynamicinformer.Options{})
	defer f.Shutdown()
	h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	if st := h.Status(); st.ContactErr != nil || st.LastContact.IsZero() {
		t.Fatalf("synced informer: ContactErr %v, LastContact %v", st.ContactErr, st.LastContact)
	}

	// The in-process server drains for a while before it is gone: time
	// from its end (when the proxy cuts every connection).
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	restarted := false
	defer func() {
		if !restarted {
			if err := cp.StartAPIServer(context.Background()); err != nil {
				t.Errorf("restarting the API server: %v", err)
			}
		}
	}()
	const bound = 8 * time.Second
	for h.Status().ContactErr == nil && time.Since(stopped) < bound {
		time.Sleep(20 * time.Millisecond)
	}
	tookLost := time.Since(stopped)
	st := h.Status()
	t.Logf("ContactErr %v after the stop: %v (state %s: %s)", tookLost.Round(time.Millisecond), st.ContactErr, st.State, st.Reason)
	if st.ContactErr == nil {
		t.Fatalf("%v after the API server stopped: state %s, no ContactErr (want one within %v)", tookLost.Round(time.Millisecond), st.State, bound)
	}
	if !errors.Is(st.ContactErr, dynamicinformer.ErrNoContact) || st.State != dynamicinformer.Stale || st.Objects != 3 {
		t.Fatalf("after losing the server: state %s, %d objects, ContactErr %v", st.State, st.Objects, st.ContactErr)
	}

	back := time.Now()
	restarted = true
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	tookStart := time.Since(back)
	restored := time.Now()
	eventually(t, ctx, "contact restored", func() bool { return h.Status().ContactErr == nil })
	tookBack := time.Since(restored)
	if st := h.Status(); st.State != dynamicinformer.Synced {
		t.Fatalf("contact restored: state %s; want Synced", st.State)
	}
	if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, obj(gvr.GroupVersion().String(), "Widget", ns, "after-restart", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "object created after the restart cached", func() bool { return h.Status().Objects == 4 })
	sc.Injected("kube-apiserver stopped (the proxy in front of it kept accepting connections) under a synced CRD informer of a factory built on a dynamic client, then started again")
	sc.Held("Stale (ContactErr ErrNoContact) %v after the stop, its 3 objects kept; Synced again and ContactErr cleared %v after the server was back (its start took %v); a new object arrived",
		tookLost.Round(10*time.Millisecond), tookBack.Round(10*time.Millisecond), tookStart.Round(100*time.Millisecond))
}

// TestClusterScopedResourceInNamespace (issue 20, defect 10): a served,
// cluster-scoped resource asked for in a namespace is Failed with
// ErrInvalid at once, with discovery or without it (then
// from the 404 of the namespaced URL and a cluster-wide check) — not
// Pending "not served" forever.
func TestClusterScopedResourceInNamespace(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	for _, withDiscovery := range []bool{true, false} {
		t.Run(fmt.Sprintf("discovery=%v", withDiscovery), func(t *testing.T) {
			var f *dynamicinformer.Factory
			if withDiscovery {
				f = newFactory(t, cp.Config())
			} else {
				f = dynamicinformer.NewSharedInformerFactory(dynamic.NewForConfigOrDie(cp.Config()), dynamicinformer.Options{})
			}
			defer f.Shutdown()
			h := f.ForResource(namespaces, dynamicinformer.WithNamespaces("default"))
			start := time.Now()
			f.Start(ctx)
			eventually(t, ctx, "Failed", func() bool { return h.Status().State == dynamicinformer.Failed })
			st := h.Status()
			if !errors.Is(st.Err, dynamicinformer.ErrInvalid) || errors.Is(st.Err, dynamicinformer.ErrNotServed) {
				t.Fatalf("status %s %q: %v", st.State, st.Reason, st.Err)
			}
			t.Logf("reported after %v: %v", time.Since(start).Round(time.Millisecond), st.Err)
		})
	}
}

// TestForbiddenCRDListDoesNotDelaySync (issue 20, defect 8): a user who
// may not list CRDs, with a factory that has no discovery client, syncs
// an allowed informer without waiting for presence's readiness timeout
// (5 s): a forbidden CRD list is an answer.
func TestForbiddenCRDListDoesNotDelaySync(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	ns := unique("nocrd")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	user := unique("nocrd-user")
	if err := cp.Grant(ctx, user, ns, "cm", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	f := dynamicinformer.NewSharedInformerFactory(dynamic.NewForConfigOrDie(cp.UserConfig(user)), dynamicinformer.Options{})
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	start := time.Now()
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[configmaps] {
		t.Fatal("not synced")
	}
	took := time.Since(start)
	t.Logf("synced %d configmaps in %v with the CRD list forbidden", h.Status().Objects, took.Round(time.Millisecond))
	if took >= 5*time.Second {
		t.Fatalf("sync took %v: waited for presence's readiness timeout", took)
	}
}

// TestSeveralNamespacesOneForbidden (issue 20, defect 14): an informer over
// two namespaces, one of which the user may not list, syncs and delivers
// the allowed namespace's objects; its status names the forbidden one.
func TestSeveralNamespacesOneForbidden(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	allowed, denied := unique("ns-ok"), unique("ns-denied")
	for _, ns := range []string{allowed, denied} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	user := unique("ns-user")
	if err := cp.Grant(ctx, user, allowed, "cm", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, cp.UserConfig(user))
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(allowed, denied))
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	eventually(t, ctx, "allowed objects delivered", func() bool { return h.Status().Objects == 2 })
	st := h.Status()
	if !errors.Is(st.Err, dynamicinformer.ErrForbidden) || !strings.Contains(st.Err.Error(), denied) || strings.Contains(st.Err.Error(), "["+allowed) {
		t.Fatalf("status %s: Err %v; want ErrForbidden naming %s only", st.State, st.Err, denied)
	}
	// Later changes in the allowed namespace arrive.
	if _, err := cp.Kube().CoreV1().ConfigMaps(allowed).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "later object delivered", func() bool { return h.Status().Objects == 3 })
}

// TestNoCRDNoDiscoveryIsQuiet (issue 20, defect 6): with only a dynamic
// client (no discovery), an informer of a resource no CRD serves yet sends
// one list (answered 404) and then waits quietly for the CRD, instead of
// re-trying every 250 ms doubling.
func TestNoCRDNoDiscoveryIsQuiet(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	gvr := schema.GroupVersionResource{Group: unique("g") + ".quiet.example.com", Version: "v1", Resource: "widgets"}
	cfg, counter := controlplane.CountRequests(cp.Config())
	f := dynamicinformer.NewSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), dynamicinformer.Options{})
	defer f.Shutdown()
	h := f.ForResource(gvr)
	f.Start(ctx)
	eventually(t, ctx, "pending", func() bool { return errors.Is(h.Status().Err, dynamicinformer.ErrNotServed) })
	time.Sleep(10 * time.Second)
	lists, watches := counter.Count("list", "/"+gvr.Resource), counter.Count("watch", "/"+gvr.Resource)
	t.Logf("in 10 s: %d lists, %d watches of a resource no CRD serves", lists, watches)
	if lists > 2 || watches > 1 {
		t.Fatalf("%d lists and %d watches in 10 s for a resource no CRD serves", lists, watches)
	}
	if st := h.Status(); st.State != dynamicinformer.Pending {
		t.Fatalf("state %s, want Pending", st.State)
	}
}
