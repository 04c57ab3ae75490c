package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"

	"github.com/informerkit/informerkit/test/controlplane"
	"github.com/informerkit/informerkit/test/crds"
)

var cp *controlplane.ControlPlane

// The watch cache would serve a watch from a compacted revision out of
// memory; without it for configmaps, the watch reaches etcd and gets 410.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{ExtraFlags: []string{"--watch-cache-sizes=configmaps#0"}}, &cp))
}

func newCronTab(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "smoke.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec":     map[string]interface{}{"cronSpec": "* * * * */5"},
	}}
	u.SetLabels(labels)
	return u
}

// TestSmokeClientGoDynamicInformer is the harness proof and the baseline:
// a CRD installed, objects created, client-go's own dynamic informer syncs
// exactly them.
func TestSmokeClientGoDynamicInformer(t *testing.T) {
	controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crd := controlplane.NewCRD("smoke.example.com", "CronTab", "crontabs", controlplane.ShortNames("sct"))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := cp.CreateNamespace(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	dyn := cp.Dynamic()
	for i := 0; i < 10; i++ {
		if _, err := dyn.Resource(gvr).Namespace("smoke").Create(ctx, newCronTab("smoke", fmt.Sprintf("ct-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(gvr)
	stop := make(chan struct{})
	f.Start(stop)
	defer f.Shutdown()
	defer close(stop)
	if !f.WaitForCacheSync(ctx.Done())[gvr] {
		t.Fatal("client-go dynamic informer did not sync")
	}
	objs, err := inf.Lister().ByNamespace("smoke").List(everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 10 {
		t.Fatalf("cached %d objects, want 10", len(objs))
	}
}

// TestCompactionGivesGone: a watch from a resourceVersion older than a
// compaction gets 410 Gone (as an error on watch start, or an error event).
func TestCompactionGivesGone(t *testing.T) {
	// Not parallel: it compacts the shared etcd (other tests' watches from older revisions would get 410).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := cp.Kube()
	if err := cp.CreateNamespace(ctx, "compaction"); err != nil {
		t.Fatal(err)
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn := cp.Dynamic()
	first, err := dyn.Resource(cms).Namespace("compaction").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "old"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldRV := first.GetResourceVersion()
	for i := 0; i < 5; i++ {
		if _, err := dyn.Resource(cms).Namespace("compaction").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": fmt.Sprintf("new-%d", i)},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := cp.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted to revision %d; watching from %s", rev, oldRV)
	// The watch cache may still hold the old revision for a while; the
	// server's watch cache is bypassed by a watch that is not served from
	// it only in some cases, so retry until the Gone shows (bounded).
	gone := false
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		w, err := kube.CoreV1().ConfigMaps("compaction").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				gone = true
				return true, nil
			}
			return false, err
		}
		defer w.Stop()
		timer := time.NewTimer(2 * time.Second)
		defer timer.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return false, nil
				}
				if ev.Type == watch.Error {
					st := apierrors.FromObject(ev.Object)
					if apierrors.IsGone(st) || apierrors.IsResourceExpired(st) {
						gone = true
						return true, nil
					}
				}
			case <-timer.C:
				// Still served from the watch cache: write more to push
				// the old revision out of the cache window.
				for i := 0; i < 50; i++ {
					_, _ = dyn.Resource(cms).Namespace("compaction").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
						"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"generateName": "push-"},
					}}, metav1.CreateOptions{})
				}
				return false, nil
			}
		}
	})
	if err != nil || !gone {
		t.Fatalf("watch from a compacted resourceVersion never got 410 Gone: %v", err)
	}
}

// TestRestartKeepsDataAndAddress: a client built before a restart works
// after it (same proxy address), and data written before is still there.
func TestRestartKeepsDataAndAddress(t *testing.T) {
	// Not parallel: it restarts the shared API server.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := cp.Kube()
	if err := cp.CreateNamespace(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic()
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := dyn.Resource(cms).Namespace("restart").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "before"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := kube.CoreV1().ConfigMaps("restart").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// The open watch ends with the old server.
	select {
	case _, ok := <-drain(w.ResultChan()):
		if ok {
			t.Fatal("watch channel should close when the server stops")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end after the API server restart")
	}
	// The same clients reconnect through the proxy.
	var got *unstructured.Unstructured
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(cms).Namespace("restart").Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = u
		return true, nil
	})
	if err != nil {
		t.Fatalf("client did not reconnect after restart: %v", err)
	}
	if got.GetName() != "before" {
		t.Fatalf("got %q", got.GetName())
	}
	if _, err := dyn.Resource(cms).Namespace("restart").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "after"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// drain returns a channel that is closed once in is closed, discarding
// events.
func drain(in <-chan watch.Event) <-chan watch.Event {
	out := make(chan watch.Event)
	go func() {
		for range in {
		}
		close(out)
	}()
	return out
}

// TestRestrictedUserIsForbidden: UserConfig with no roles is Forbidden;
// Grant makes the same call succeed.
func TestRestrictedUserIsForbidden(t *testing.T) {
	controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cp.CreateNamespace(ctx, "rbac"); err != nil {
		t.Fatal(err)
	}
	alice := dynamic.NewForConfigOrDie(cp.UserConfig("alice"))
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	_, err := alice.Resource(cms).Namespace("rbac").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden, got %v", err)
	}
	if err := cp.Grant(ctx, "alice", "rbac", "cm-reader", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"},
	}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := alice.Resource(cms).Namespace("rbac").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("granted list still refused")
	}
	if _, err := alice.Resource(cms).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("other namespace: want Forbidden, got %v", err)
	}
}

// TestProxyCutAll: cutting connections ends open watches.
func TestProxyCutAll(t *testing.T) {
	// Not parallel: it cuts the shared proxy's connections.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := cp.Kube().CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n := cp.Proxy().CutAll(); n == 0 {
		t.Fatal("no connection to cut")
	}
	select {
	case _, ok := <-drain(w.ResultChan()):
		if ok {
			t.Fatal("unexpected")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch survived CutAll")
	}
}

// TestInstallCRDYAMLAndDelete installs the project's own CRDs from YAML (a
// multi-document file of four CRDs, and one CRD with a ~680 KB schema),
// shows that the server serves every version as declared and enforces the
// large schema, then deletes them all.
func TestInstallCRDYAMLAndDelete(t *testing.T) {
	controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var names []string
	for _, file := range []string{crds.Edge, crds.EdgeProxy} {
		data, err := crds.YAML(file)
		if err != nil {
			t.Fatal(err)
		}
		installed, err := cp.InstallCRDYAML(ctx, data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, crd := range installed {
			names = append(names, crd.Name)
		}
	}
	want := []string{"gatewayclasses.edge.example.com", "gateways.edge.example.com", "routes.edge.example.com",
		"backendgrants.edge.example.com", "edgeproxies.edge.example.com"}
	if !slices.Equal(names, want) {
		t.Fatalf("installed %v, want %v", names, want)
	}
	edge := func(version, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: crds.Group, Version: version, Resource: resource}
	}

	// Versions: served ones answer, the unserved one does not; BackendGrant
	// is stored at v1beta1 although v1 is served beside it.
	for _, gvr := range []schema.GroupVersionResource{edge("v1", "gatewayclasses"), edge("v1beta1", "gateways"),
		edge("v1", "routes"), edge("v1beta1", "routes"), edge("v1", "backendgrants"), edge("v1beta1", "backendgrants"),
		edge("v1alpha1", "edgeproxies")} {
		if _, err := cp.Dynamic().Resource(gvr).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list %v: %v", gvr, err)
		}
	}
	if _, err := cp.Dynamic().Resource(edge("v1alpha2", "routes")).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unserved routes v1alpha2: want NotFound, got %v", err)
	}
	grants, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "backendgrants.edge.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(grants.Status.StoredVersions, []string{"v1beta1"}) {
		t.Errorf("backendgrants stored versions %v, want [v1beta1]", grants.Status.StoredVersions)
	}

	// The large schema is enforced: a field it does not declare is pruned,
	// a wrongly typed one refused.
	proxies := cp.Dynamic().Resource(edge("v1", "edgeproxies")).Namespace("default")
	proxy := func(name string, port any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crds.Group + "/v1", "kind": "EdgeProxy",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{
					"name": "proxy", "image": "proxy:1.0", "notAField": "pruned",
					"ports":     []any{map[string]any{"containerPort": port}},
					"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "128Mi"}},
				}},
			}}},
		}}
	}
	created, err := proxies.Create(ctx, proxy("p1", int64(8080)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(created.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("created containers %v", containers)
	}
	c := containers[0].(map[string]any)
	if _, ok := c["notAField"]; ok {
		t.Errorf("an undeclared field survived: %v", c)
	}
	if cpu, _, _ := unstructured.NestedString(c, "resources", "limits", "cpu"); cpu != "500m" {
		t.Errorf("declared fields lost: %v", c)
	}
	if _, err := proxies.Create(ctx, proxy("p2", "eighty"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("containerPort \"eighty\": want Invalid, got %v", err)
	}

	for _, name := range names {
		if err := cp.DeleteCRD(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{edge("v1", "gatewayclasses"), edge("v1", "edgeproxies")} {
		if _, err := cp.Dynamic().Resource(gvr).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("after delete: list %v: want NotFound, got %v", gvr, err)
		}
	}
}

// TestInstallCRDYAMLCorpus installs third-party CRDs from the optional
// corpus ($INFORMERKIT_TESTDATA): Gateway API's GatewayClass and
// prometheus-operator's Prometheus (an ~830 KB schema), then deletes them.
func TestInstallCRDYAMLCorpus(t *testing.T) {
	controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		file string
		gvr  schema.GroupVersionResource
	}{
		{"crds/gateway-api/standard/gateway.networking.k8s.io_gatewayclasses.yaml",
			schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}},
		{"crds/prometheus-operator/monitoring.coreos.com_prometheuses.yaml",
			schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}},
	} {
		data := crds.ReadCorpus(t, tc.file)
		installed, err := cp.InstallCRDYAML(ctx, data)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		name := tc.gvr.Resource + "." + tc.gvr.Group
		if len(installed) != 1 || installed[0].Name != name {
			t.Fatalf("%s: installed %v, want %s", tc.file, installed, name)
		}
		if _, err := cp.Dynamic().Resource(tc.gvr).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list %v: %v", tc.gvr, err)
		}
		if err := cp.DeleteCRD(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Dynamic().Resource(tc.gvr).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("after delete: want NotFound, got %v", err)
		}
	}
}

// TestDeleteCRDRightAfterCreate deletes CRDs right after they are served,
// while their watch caches may still be initializing (the server's CRD
// finalizer can then stall until its resync; DeleteCRD nudges it): every
// deletion completes, within 30 s.
func TestDeleteCRDRightAfterCreate(t *testing.T) {
	controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var slowest time.Duration
	for i := 0; i < 10; i++ {
		crd := controlplane.NewCRD("quickdelete.example.com", "Blip", "blips", controlplane.Versions("v1", "v2"))
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cp.DeleteCRD(ctx, crd.Name); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		took := time.Since(start)
		if took > 30*time.Second {
			t.Errorf("cycle %d: deleting took %v", i, took)
		}
		slowest = max(slowest, took)
	}
	t.Logf("slowest deletion of 10: %v", slowest)
}
