package crcachetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// events counts a handler's adds and deletes by name.
type events struct {
	mu      sync.Mutex
	adds    map[string]int
	deletes map[string]int
}

func newEvents() *events { return &events{adds: map[string]int{}, deletes: map[string]int{}} }

func (e *events) handler() toolscache.ResourceEventHandler {
	name := func(o any) string {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		return o.(client.Object).GetName()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.mu.Lock(); e.adds[name(o)]++; e.mu.Unlock() },
		DeleteFunc: func(o any) { e.mu.Lock(); e.deletes[name(o)]++; e.mu.Unlock() },
	}
}

func (e *events) count() (adds, deletes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.adds {
		adds += n
	}
	for _, n := range e.deletes {
		deletes += n
	}
	return adds, deletes
}

// TestCRPendingRemovedReturningCRD: GetInformer for a kind whose CRD is
// not installed returns at once (controller-runtime's fails: no match for
// the kind), List/Get answer ErrResourceNotServed, the informer syncs
// when the CRD is installed; when the CRD is deleted the handlers get a
// delete per object and no request is sent against the missing resource
// (no 404 loop); when it returns, the same informer syncs again.
// Unstructured and typed informers alike. No goroutine is left.
func TestCRPendingRemovedReturningCRD(t *testing.T) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	crd := newWidgetCRD()
	ns := newNamespace(t, ctx)
	cfg, counter := controlplane.CountRequests(cp.Config())
	c, err := controllerruntime.NewCache(cfg, crcache.Options{Scheme: crd.scheme})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()

	gctx, gcancel := context.WithTimeout(ctx, 20*time.Second)
	defer gcancel()
	start := time.Now()
	uinf, err := c.GetInformer(gctx, crd.u())
	if err != nil {
		t.Fatalf("GetInformer of a kind not served: %v", err)
	}
	tinf, err := c.GetInformer(gctx, &Widget{})
	if err != nil {
		t.Fatalf("typed GetInformer of a kind not served: %v", err)
	}
	t.Logf("GetInformer of a kind not served returned in %v", time.Since(start).Round(time.Millisecond))
	ue, te := newEvents(), newEvents()
	ureg, err := uinf.AddEventHandler(ue.handler())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tinf.AddEventHandler(te.handler()); err != nil {
		t.Fatal(err)
	}
	if !uinf.HasSynced() || !ureg.HasSynced() || !c.WaitForCacheSync(gctx) {
		t.Errorf("not served: HasSynced %v, registration %v", uinf.HasSynced(), ureg.HasSynced())
	}
	notServed := func(what string) {
		t.Helper()
		err := c.List(ctx, crd.ulist())
		if !errors.Is(err, controllerruntime.ErrResourceNotServed) || !errors.Is(err, dynamicinformer.ErrNotServed) {
			t.Errorf("%s: List: %v", what, err)
		}
		var nse *controllerruntime.NotServedError
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w-0"}, &Widget{}); !errors.As(err, &nse) || nse.GVK != crd.gvk {
			t.Errorf("%s: typed Get: %v", what, err)
		}
	}
	notServed("pending")
	// controller-runtime's own cache fails for the same kind.
	if cr, err := crcache.New(cp.Config(), crcache.Options{Scheme: crd.scheme}); err == nil {
		crctx, crcancel := context.WithTimeout(ctx, 3*time.Second)
		_, crerr := cr.GetInformer(crctx, crd.u(), crcache.BlockUntilSynced(false))
		crcancel()
		t.Logf("controller-runtime's GetInformer of the kind: %v", crerr)
	}

	crd.install(t, ctx)
	crd.create(t, ctx, ns, "w-0", nil)
	crd.create(t, ctx, ns, "w-1", nil)
	eventually(t, ctx, "adds after install", func() bool {
		ua, _ := ue.count()
		ta, _ := te.count()
		return ua == 2 && ta == 2
	})
	var wl WidgetList
	if err := c.List(ctx, &wl, client.InNamespace(ns)); err != nil || len(wl.Items) != 2 || wl.Items[0].Spec.Value == "" {
		t.Fatalf("typed List after install: %v %+v", err, wl.Items)
	}

	if err := cp.DeleteCRD(ctx, crd.def.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "deletes after the CRD is deleted", func() bool {
		_, ud := ue.count()
		_, td := te.count()
		return ud == 2 && td == 2
	})
	eventually(t, ctx, "List not served", func() bool {
		return errors.Is(c.List(ctx, crd.ulist()), controllerruntime.ErrResourceNotServed)
	})
	notServed("removed")
	path := "/" + crd.gvr.Resource
	before := counter.Count("list", path) + counter.Count("watch", path)
	time.Sleep(5 * time.Second)
	if n := counter.Count("list", path) + counter.Count("watch", path) - before; n > 0 {
		t.Errorf("%d list/watch requests for the deleted resource in 5 s (a 404 loop)", n)
	}

	crd.install(t, ctx)
	crd.create(t, ctx, ns, "w-2", nil)
	eventually(t, ctx, "add after the CRD returns", func() bool {
		ue.mu.Lock()
		defer ue.mu.Unlock()
		return ue.adds["w-2"] == 1
	})
	l := crd.ulist()
	if err := c.List(ctx, l); err != nil || len(l.Items) != 1 {
		t.Errorf("List after the CRD returned: %v, %d items", err, len(l.Items))
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	leaks.VerifyNoLeaks(t)
}

// TestCRForbiddenNamesVerbs: a resource the user may not list or watch
// is an error from GetInformer naming the verbs (informerkit's access
// check), within seconds, not a sync timeout.
func TestCRForbiddenNamesVerbs(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	user := unique("crc-user")
	c, err := controllerruntime.NewCache(cp.UserConfig(user), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCache(t, ctx, c)
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	start := time.Now()
	_, err = c.GetInformer(gctx, &corev1.ConfigMap{})
	took := time.Since(start)
	if !errors.Is(err, dynamicinformer.ErrForbidden) || !strings.Contains(err.Error(), "list") || !strings.Contains(err.Error(), "watch") {
		t.Fatalf("GetInformer of a forbidden resource after %v: %v", took, err)
	}
	if took > 15*time.Second {
		t.Errorf("the error took %v", took)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if err := c.List(gctx, &corev1.ConfigMapList{}); !errors.Is(err, dynamicinformer.ErrForbidden) {
		t.Errorf("List: %v", err)
	}
}

// TestCRControllerBeforeItsCRD: a manager with NewCache runs
// controllers For an unstructured and a typed Widget started before the
// Widget CRD exists; the manager keeps running, both reconcile once the
// CRD is installed, and no goroutine is left once it stops.
func TestCRControllerBeforeItsCRD(t *testing.T) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	crd := newWidgetCRD()
	ns := newNamespace(t, ctx)
	mgr, err := manager.New(cp.Config(), manager.Options{
		Scheme:                 crd.scheme,
		NewCache:               controllerruntime.NewCache,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]map[string]int{"unstructured": {}, "typed": {}}
	rec := func(kind string) reconcile.Func {
		return func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			got[kind][req.String()]++
			mu.Unlock()
			return reconcile.Result{}, nil
		}
	}
	if err := builder.ControllerManagedBy(mgr).Named(unique("u-widget")).For(crd.u()).Complete(rec("unstructured")); err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named(unique("t-widget")).For(&Widget{}).Complete(rec("typed")); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	select {
	case err := <-done:
		t.Fatalf("manager exited before the CRD was installed: %v", err)
	case <-time.After(3 * time.Second):
	}
	crd.install(t, ctx)
	crd.create(t, ctx, ns, "w-0", nil)
	want := ns + "/w-0"
	var reconciled atomic.Bool
	eventually(t, ctx, "both controllers reconcile w-0", func() bool {
		mu.Lock()
		defer mu.Unlock()
		ok := got["unstructured"][want] > 0 && got["typed"][want] > 0
		reconciled.Store(ok)
		return ok
	})
	var w Widget
	if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: "w-0"}, &w); err != nil || w.Spec.Value != "w-0" {
		t.Errorf("manager client Get (from the cache): %v %+v", err, w.Spec)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	leaks.VerifyNoLeaks(t)
	_ = unstructured.Unstructured{}
	_ = metav1.Now
}
