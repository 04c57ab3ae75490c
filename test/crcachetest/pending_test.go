package crcachetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-logr/logr/funcr"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// Mouse is a user's CRD type whose plural ("mice") is not the guess of
// meta.UnsafeGuessKindToResource ("mouses").
type Mouse struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

func (m *Mouse) DeepCopyObject() runtime.Object {
	c := *m
	m.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

type MouseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Mouse `json:"items"`
}

func (l *MouseList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Mouse, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Mouse)
	}
	return &c
}

// newMouseCRD builds (does not install) a namespaced Mouse CRD with plural
// "mice" in a group of its own, and a scheme with client-go's types and
// Mouse.
func newMouseCRD() *crdDef {
	group := unique("m") + ".crcache.example.com"
	def := controlplane.NewCRD(group, "Mouse", "mice")
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(gv, &Mouse{}, &MouseList{})
	metav1.AddToGroupVersion(s, gv)
	return &crdDef{def: def, gvr: controlplane.GVR(def), gvk: gv.WithKind("Mouse"), scheme: s}
}

func (c *crdDef) obj(ns, name string) *unstructured.Unstructured {
	u := c.widget(ns, name, nil)
	u.SetKind(c.gvk.Kind)
	return u
}

func (c *crdDef) createObj(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if _, err := cp.Dynamic().Resource(c.gvr).Namespace(ns).Create(ctx, c.obj(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *crdDef) list() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(c.gvk.GroupVersion().WithKind(c.gvk.Kind + "List"))
	return l
}

// guessedPath is the resource path meta.UnsafeGuessKindToResource gives
// the kind ("/mouses" for Mouse), when it is not the CRD's plural.
func guessedPath(c *crdDef) string {
	return "/" + strings.ToLower(c.gvk.Kind) + "s"
}

// TestCRPendingKindOtherPlural: GetInformer (unstructured and typed), with
// a handler and a field index added before the CRD exists, for a kind
// whose plural is not the guessed one ("mice", not "mouses"), and for a
// cluster-scoped kind with plural "widgetz" while DefaultNamespaces is
// set: once the CRDs are installed the informers sync at the CRD's real
// resource and scope, the handlers added meanwhile get an add per
// object, the field index answers, and no request ever goes to a guessed
// resource. No goroutine is left.
func TestCRPendingKindOtherPlural(t *testing.T) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	t.Cleanup(func() { leaks.VerifyNoLeaks(t) }) // after the cache stops (runCache's cleanup runs first)
	mice := newMouseCRD()
	ns := newNamespace(t, ctx)
	// A cluster-scoped Widget CRD with plural "widgetz", in mice's scheme.
	wgroup := unique("z") + ".crcache.example.com"
	wdef := controlplane.NewCRD(wgroup, "Widget", "widgetz", controlplane.ClusterScoped())
	wz := &crdDef{def: wdef, gvr: controlplane.GVR(wdef), gvk: schema.GroupVersionKind{Group: wgroup, Version: "v1", Kind: "Widget"}}

	cfg, counter := controlplane.CountRequests(cp.Config())
	c, err := controllerruntime.NewCache(cfg, crcache.Options{Scheme: mice.scheme,
		DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	uinf, err := c.GetInformer(gctx, mice.u())
	if err != nil {
		t.Fatal(err)
	}
	tinf, err := c.GetInformer(gctx, &Mouse{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.IndexField(gctx, &Mouse{}, "spec.value", func(o client.Object) []string {
		return []string{o.(*Mouse).Spec.Value}
	}); err != nil {
		t.Fatal(err)
	}
	zinf, err := c.GetInformer(gctx, wz.u())
	if err != nil {
		t.Fatal(err)
	}
	ue, te, ze := newEvents(), newEvents(), newEvents()
	for inf, ev := range map[crcache.Informer]*events{uinf: ue, tinf: te, zinf: ze} {
		if _, err := inf.AddEventHandler(ev.handler()); err != nil {
			t.Fatal(err)
		}
	}
	runCache(t, ctx, c)
	if err := c.List(ctx, mice.list()); !errors.Is(err, controllerruntime.ErrResourceNotServed) || !errors.Is(err, dynamicinformer.ErrNotServed) {
		t.Errorf("List before the CRD: %v", err)
	}
	for _, inf := range []crcache.Informer{uinf, tinf, zinf} {
		if !inf.HasSynced() || inf.IsStopped() {
			t.Errorf("before the CRD: HasSynced %v, IsStopped %v", inf.HasSynced(), inf.IsStopped())
		}
	}

	mice.install(t, ctx)
	if err := cp.InstallCRD(ctx, wdef.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	mice.createObj(t, ctx, ns, "m-0")
	mice.createObj(t, ctx, ns, "m-1")
	if _, err := cp.Dynamic().Resource(wz.gvr).Create(ctx, wz.obj("", "z-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "adds at the CRDs' real resources", func() bool {
		ua, _ := ue.count()
		ta, _ := te.count()
		za, _ := ze.count()
		return ua == 2 && ta == 2 && za == 1
	})
	var ml MouseList
	if err := c.List(ctx, &ml, client.InNamespace(ns)); err != nil || len(ml.Items) != 2 {
		t.Errorf("typed List: %v, %d items", err, len(ml.Items))
	}
	ml = MouseList{}
	if err := c.List(ctx, &ml, client.MatchingFields{"spec.value": "m-1"}); err != nil || len(ml.Items) != 1 || ml.Items[0].Name != "m-1" {
		t.Errorf("List by the field index added while pending: %v, %+v", err, ml.Items)
	}
	var m Mouse
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m-0"}, &m); err != nil || m.Spec.Value != "m-0" {
		t.Errorf("typed Get: %v %+v", err, m.Spec)
	}
	z := wz.u()
	if err := c.Get(ctx, client.ObjectKey{Name: "z-0"}, z); err != nil || z.GetName() != "z-0" {
		t.Errorf("cluster-scoped Get: %v", err)
	}
	for _, p := range []string{guessedPath(mice), guessedPath(wz)} {
		if n := counter.Count("list", p) + counter.Count("watch", p); n > 0 {
			t.Errorf("%d list/watch requests to the guessed %s", n, p)
		}
	}
	if st := uinf.(*controllerruntime.Informer).Status(); st.GVR != mice.gvr || st.State != dynamicinformer.Synced {
		t.Errorf("Status: %s %s", st.GVR, st.State)
	}
	t.Logf("requests: %v", counter.Keys())
}

// TestCRManagerCRDComesAndGoes: a manager with NewCache runs a typed and
// an unstructured controller For a kind whose CRD does not exist yet (and
// whose plural is not the guessed one). It reconciles once the CRD is
// installed; when the CRD is deleted it stops reconciling cleanly — a
// reconcile that runs after the kind is gone reads NotFound, so
// client.IgnoreNotFound ends it and nothing is retried — and resumes when
// the CRD returns. The manager never exits, no reconcile error and no
// error log occur, no list or watch is sent for the resource while it is
// absent (no 404 loop), and no goroutine is left after the manager stops.
func TestCRManagerCRDComesAndGoes(t *testing.T) {
	controlplane.Parallel(t)
	t.Run("Widget", func(t *testing.T) {
		// A plural the guess gets right: the NotFound part on its own.
		managerCRDComesAndGoes(t, newWidgetCRD(), func() client.Object { return &Widget{} })
	})
	t.Run("Mouse", func(t *testing.T) {
		managerCRDComesAndGoes(t, newMouseCRD(), func() client.Object { return &Mouse{} })
	})
}

func managerCRDComesAndGoes(t *testing.T, mice *crdDef, newTyped func() client.Object) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ns := newNamespace(t, ctx)
	cfg, counter := controlplane.CountRequests(cp.Config())
	var errorLogs atomic.Int64
	var lastErrorLog atomic.Value
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, `"error"=`) {
			errorLogs.Add(1)
			lastErrorLog.Store(args)
		}
	}, funcr.Options{})
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 mice.scheme,
		NewCache:               controllerruntime.NewCache,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]map[string]int{"unstructured": {}, "typed": {}}
	var recErrs atomic.Int64
	var lastRecErr atomic.Value
	// slow holds the reconcile of "m-slow" after the CRD's deletion until
	// the kind is gone from the cache, as a request queued at that moment
	// would be.
	var holdSlow atomic.Bool
	slowGate := make(chan struct{})
	rec := func(kind string, newObj func() client.Object) reconcile.Func {
		return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			calls[kind][req.Name]++
			mu.Unlock()
			if req.Name == "m-slow" && holdSlow.Load() {
				select {
				case <-slowGate:
				case <-ctx.Done():
				}
			}
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, newObj()); err != nil {
				if !apierrors.IsNotFound(err) {
					recErrs.Add(1)
					lastRecErr.Store(err.Error())
				}
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			return reconcile.Result{}, nil
		}
	}
	if err := builder.ControllerManagedBy(mgr).Named(unique("u-mouse")).For(mice.u()).
		Complete(rec("unstructured", func() client.Object { return mice.u() })); err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named(unique("t-mouse")).For(newTyped()).
		Complete(rec("typed", newTyped)); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		<-done
	}()
	running := func(what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("manager exited %s: %v", what, err)
		default:
		}
	}
	listWatch := func() int {
		n := 0
		paths := []string{"/" + mice.gvr.Resource}
		if g := guessedPath(mice); g != paths[0] {
			paths = append(paths, g)
		}
		for _, p := range paths {
			n += counter.Count("list", p) + counter.Count("watch", p)
		}
		return n
	}
	reconciled := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["unstructured"][name] > 0 && calls["typed"][name] > 0
	}
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range calls {
			for _, c := range m {
				n += c
			}
		}
		return n
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync")
	}

	// Absent before the first install.
	time.Sleep(5 * time.Second)
	running("before the CRD was installed")
	if n := listWatch(); n > 0 {
		t.Errorf("%d list/watch requests for the resource before its CRD exists: %v", n, counter.Keys())
	}

	mice.install(t, ctx)
	mice.createObj(t, ctx, ns, "m-0")
	mice.createObj(t, ctx, ns, "m-slow")
	eventually(t, ctx, "both controllers reconcile m-0 and m-slow", func() bool { return reconciled("m-0") && reconciled("m-slow") })

	// The CRD goes: deletes are reconciled (NotFound); a reconcile held
	// until the kind is gone also reads NotFound.
	holdSlow.Store(true)
	if err := cp.DeleteCRD(ctx, mice.def.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the kind not served", func() bool {
		return errors.Is(mgr.GetCache().List(ctx, mice.list()), controllerruntime.ErrResourceNotServed)
	})
	close(slowGate)
	time.Sleep(time.Second) // let held and queued reconciles end
	before, beforeCalls := listWatch(), total()
	time.Sleep(5 * time.Second)
	running("while the CRD was deleted")
	if n := listWatch() - before; n > 0 {
		t.Errorf("%d list/watch requests in 5 s while the CRD is deleted (a 404 loop)", n)
	}
	if n := total() - beforeCalls; n > 0 {
		t.Errorf("%d reconciles in 5 s while the CRD is deleted (a retry loop)", n)
	}
	if n := recErrs.Load(); n > 0 {
		t.Errorf("%d reconcile errors; last: %v", n, lastRecErr.Load())
	}
	if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: "m-0"}, newTyped()); !apierrors.IsNotFound(err) || !errors.Is(err, controllerruntime.ErrResourceNotServed) {
		t.Errorf("Get of a kind not served: %v (want NotFound and ErrResourceNotServed)", err)
	}

	// The CRD returns.
	mice.install(t, ctx)
	mice.createObj(t, ctx, ns, "m-2")
	eventually(t, ctx, "both controllers reconcile m-2", func() bool { return reconciled("m-2") })
	running("after the CRD returned")
	if n := recErrs.Load(); n > 0 {
		t.Errorf("%d reconcile errors; last: %v", n, lastRecErr.Load())
	}
	if n := errorLogs.Load(); n > 0 {
		t.Errorf("%d error logs; last: %v", n, lastErrorLog.Load())
	}
	t.Logf("reconciles: %v", calls)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	done <- nil // for the deferred receive
	leaks.VerifyNoLeaks(t)
}
