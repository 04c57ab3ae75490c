package crcachetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestCRMapperMapsUnknownKind: Options.Mapper maps a kind the discovery
// resolver does not know (its CRD not installed yet) to the Mapper's
// resource and scope, in both caches: informerkit's informer is Pending
// at the Mapper's resource, and once the CRD is installed both caches
// hold the same objects.
func TestCRMapperMapsUnknownKind(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	mice := newMouseCRD()
	ns := newNamespace(t, ctx)
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(mice.gvk, mice.gvr, mice.gvr.GroupVersion().WithResource("mouse"), apimeta.RESTScopeNamespace)
	opts := crcache.Options{Scheme: mice.scheme, Mapper: mapper}
	p := newPair(t, ctx, cp.Config(), opts, nil)
	infs := map[string]crcache.Informer{}
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		inf, err := c.GetInformer(gctx, mice.u(), crcache.BlockUntilSynced(false))
		cancel()
		if err != nil {
			t.Fatalf("%s: GetInformer of a kind only the Mapper knows: %v", name, err)
		}
		infs[name] = inf
	}
	// Pending with no error at first (presence not yet asked), then
	// Pending with ErrNotServed once the factory knows the CRD is absent.
	ik := infs["informerkit"].(*controllerruntime.Informer)
	eventually(t, ctx, "Pending, not served, at the Mapper's resource", func() bool {
		st := ik.Status()
		return st.GVR == mice.gvr && st.State == dynamicinformer.Pending && errors.Is(st.Err, dynamicinformer.ErrNotServed)
	})
	mice.install(t, ctx)
	mice.createObj(t, ctx, ns, "m-0")
	mice.createObj(t, ctx, ns, "m-1")
	for name, inf := range infs {
		eventually(t, ctx, name+" synced", inf.HasSynced)
	}
	eventually(t, ctx, "both caches hold the mice", func() bool {
		a, b := mice.list(), mice.list()
		return p.ik.List(ctx, a) == nil && p.cr.List(ctx, b) == nil && len(a.Items) == 2 && len(b.Items) == 2
	})
	compareList(t, ctx, p, "mice", func() client.ObjectList { return mice.list() })
	compareList(t, ctx, p, "typed mice", func() client.ObjectList { return &MouseList{} }, client.InNamespace(ns))
}

// TestCRBlockUntilSyncedFalse: GetInformer and GetInformerForKind with
// BlockUntilSynced(false) return the informer at once in both caches,
// also when it cannot sync (its user may not list the resource: the
// blocking GetInformer of informerkit is then an ErrForbidden); an
// informer got so syncs afterwards, and reads match.
func TestCRBlockUntilSyncedFalse(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	user := unique("crc-nosync")
	denied := newPair(t, ctx, cp.UserConfig(user), crcache.Options{}, nil)
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	for name, c := range map[string]crcache.Cache{"informerkit": denied.ik, "controller-runtime": denied.cr} {
		gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		inf, err := c.GetInformer(gctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
		kinf, kerr := c.GetInformerForKind(gctx, cmGVK, crcache.BlockUntilSynced(false))
		took := time.Since(start)
		cancel()
		if err != nil || kerr != nil || inf == nil || kinf == nil {
			t.Fatalf("%s: GetInformer(BlockUntilSynced(false)) of a forbidden resource: %v; ForKind: %v", name, err, kerr)
		}
		if took > 5*time.Second {
			t.Errorf("%s: returned after %v", name, took)
		}
		if inf.HasSynced() {
			t.Errorf("%s: a forbidden informer HasSynced", name)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err := denied.ik.GetInformer(gctx, &corev1.ConfigMap{})
	cancel()
	if !errors.Is(err, dynamicinformer.ErrForbidden) {
		t.Errorf("informerkit: blocking GetInformer of a forbidden resource: %v", err)
	}

	f := newFixture(t, ctx)
	p := newPair(t, ctx, cp.Config(), crcache.Options{Scheme: f.crd.scheme}, nil)
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		inf, err := c.GetInformer(ctx, f.crd.u(), crcache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		kinf, err := c.GetInformerForKind(ctx, f.crd.gvk, crcache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		if !c.WaitForCacheSync(ctx) || !inf.HasSynced() || !kinf.HasSynced() {
			t.Errorf("%s: after WaitForCacheSync: HasSynced %v, ForKind %v", name, inf.HasSynced(), kinf.HasSynced())
		}
	}
	compareList(t, ctx, p, "widgets", func() client.ObjectList { return f.crd.ulist() })
	compareList(t, ctx, p, "typed widgets", func() client.ObjectList { return &WidgetList{} })
}

// TestCRMoreOptionsMatchControllerRuntime: ByObject's Field selector,
// DefaultNamespaces on a cluster-scoped kind (ignored), Get with
// UnsafeDisableDeepCopy, and RemoveInformer followed by a new informer
// answer as in controller-runtime's cache.
func TestCRMoreOptionsMatchControllerRuntime(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	f := newFixture(t, ctx)
	p := newPair(t, ctx, cp.Config(), crcache.Options{
		Scheme:            f.crd.scheme,
		DefaultNamespaces: map[string]crcache.Config{f.ns[0]: {}, f.ns[1]: {}},
		ByObject: map[client.Object]crcache.ByObject{
			f.crd.u(): {Field: fields.OneTermEqualSelector("metadata.name", "w-1")},
		},
	}, nil)
	if n := compareList(t, ctx, p, "ByObject.Field widgets", func() client.ObjectList { return f.crd.ulist() }); n != 2 {
		t.Errorf("ByObject.Field: %d widgets, want 2", n)
	}
	// ByObject is per kind: the typed informer of the kind has the selector too.
	if n := compareList(t, ctx, p, "ByObject.Field typed widgets", func() client.ObjectList { return &WidgetList{} }); n != 2 {
		t.Errorf("ByObject.Field typed: %d widgets, want 2", n)
	}
	if n := compareList(t, ctx, p, "configmaps in two namespaces", func() client.ObjectList { return &corev1.ConfigMapList{} }); n < 9 {
		t.Errorf("configmaps in two namespaces: %d, want at least 9", n)
	}
	nsList := func() client.ObjectList { return &corev1.NamespaceList{} }
	if n := compareList(t, ctx, p, "namespaces (cluster-scoped, DefaultNamespaces ignored)", nsList); n < 3 {
		t.Errorf("namespaces: %d", n)
	}
	compareGet(t, ctx, p, "cluster-scoped Get", client.ObjectKey{Name: f.ns[2]}, func() client.Object { return &corev1.Namespace{} })

	key := client.ObjectKey{Namespace: f.ns[0], Name: "w-1"}
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		get := func(opts ...client.GetOption) map[string]any {
			u := f.crd.u()
			if err := c.Get(ctx, key, u, opts...); err != nil {
				t.Fatalf("%s: Get: %v", name, err)
			}
			return u.Object
		}
		a, b := get(client.UnsafeDisableDeepCopy), get(client.UnsafeDisableDeepCopy)
		if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
			t.Errorf("%s: Get with UnsafeDisableDeepCopy: copies", name)
		}
		a, b = get(), get()
		if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
			t.Errorf("%s: Get: the cache's object", name)
		}
	}

	// RemoveInformer, then a new informer of the kind.
	for name, c := range map[string]crcache.Cache{"informerkit": p.ik, "controller-runtime": p.cr} {
		old, err := c.GetInformer(ctx, &Widget{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveInformer(ctx, &Widget{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, name+" old informer stopped", old.IsStopped)
		inf, err := c.GetInformer(ctx, &Widget{})
		if err != nil {
			t.Fatalf("%s: GetInformer after RemoveInformer: %v", name, err)
		}
		if inf == old || inf.IsStopped() || !inf.HasSynced() {
			t.Errorf("%s: new informer: same %v, IsStopped %v, HasSynced %v", name, inf == old, inf.IsStopped(), inf.HasSynced())
		}
	}
	// The new informers follow changes (w-1 is the only widget the field
	// selector keeps in f.ns[0]).
	w1, err := cp.Dynamic().Resource(f.crd.gvr).Namespace(f.ns[0]).Get(ctx, "w-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w1.SetLabels(map[string]string{"after": "remove"})
	if _, err := cp.Dynamic().Resource(f.crd.gvr).Namespace(f.ns[0]).Update(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "both caches see the update", func() bool {
		for _, c := range []crcache.Cache{p.ik, p.cr} {
			var w Widget
			if c.Get(ctx, key, &w) != nil || w.Labels["after"] != "remove" {
				return false
			}
		}
		return true
	})
	compareList(t, ctx, p, "typed widgets after RemoveInformer", func() client.ObjectList { return &WidgetList{} })
}

// TestCRForbiddenNoRequestLoop: a forbidden resource is an error that
// names the user, the verbs and the namespaces (cluster-wide, and for
// DefaultNamespaces with one namespace partly granted), Get and List
// answer it at once, and no list or watch is sent for the resource — not
// even one answered 403 — while the cache runs (no 403 loop).
func TestCRForbiddenNoRequestLoop(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	nsA, nsB := newNamespace(t, ctx), newNamespace(t, ctx)
	cases := []struct {
		name  string
		opts  crcache.Options
		grant string // namespace where the user may list (not watch) configmaps
		want  []string
	}{
		{"cluster-wide", crcache.Options{}, "", []string{"may not list, watch configmaps in all namespaces"}},
		{"two namespaces", crcache.Options{DefaultNamespaces: map[string]crcache.Config{nsA: {}, nsB: {}}}, nsA,
			[]string{"may not watch configmaps in namespace " + nsA, "may not list, watch configmaps in namespace " + nsB}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user := unique("crc-denied")
			if tc.grant != "" {
				if err := cp.Grant(ctx, user, tc.grant, "list-cm", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}); err != nil {
					t.Fatal(err)
				}
			}
			cfg, counter := controlplane.CountRequests(cp.UserConfig(user))
			c, err := controllerruntime.NewCache(cfg, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			runCache(t, ctx, c)
			gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err = c.GetInformer(gctx, &corev1.ConfigMap{})
			if !errors.Is(err, dynamicinformer.ErrForbidden) {
				t.Fatalf("GetInformer: %v", err)
			}
			for _, w := range append(tc.want, `user "`+user+`"`) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			t.Logf("%v", err)
			for what, read := range map[string]func() error{
				"List": func() error { return c.List(gctx, &corev1.ConfigMapList{}) },
				"Get":  func() error { return c.Get(gctx, client.ObjectKey{Namespace: nsA, Name: "x"}, &corev1.ConfigMap{}) },
				"unstructured List": func() error {
					l := &unstructured.UnstructuredList{}
					l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
					return c.List(gctx, l)
				},
			} {
				start := time.Now()
				if err := read(); !errors.Is(err, dynamicinformer.ErrForbidden) || time.Since(start) > 10*time.Second {
					t.Errorf("%s after %v: %v", what, time.Since(start), err)
				}
			}
			reviews := func() int { return counter.Count("post", "selfsubject") }
			r0 := reviews()
			time.Sleep(6 * time.Second)
			if n := counter.Count("list", "/configmaps") + counter.Count("watch", "/configmaps"); n > 0 {
				t.Errorf("%d list/watch requests for the forbidden configmaps (a 403 loop): %v", n, counter.Keys())
			}
			t.Logf("access reviews: %d before the 6 s window, %d in it", r0, reviews()-r0)
		})
	}
}
