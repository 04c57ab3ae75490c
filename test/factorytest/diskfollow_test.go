package factorytest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRestartFollowingInformer: an informer asked for by name without a
// version (it follows the CRD's preferred version) is kept on disk under
// the version it follows. A restart at the same version resumes (no
// list); after it moved to v2 while running (v2 served beside v1), the
// state is stored again under v2, so the next restart resumes at v2 with
// objects of apiVersion v2; a restart that finds another version
// preferred than the stored one does not restore objects of the old
// version (a cold start, "another informer spec").
func TestRestartFollowingInformer(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	group := unique("diskfollow") + ".factory.example.com"
	crd := controlplane.NewCRD(group, "Widget", "widgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	v1 := controlplane.GVR(crd)
	v2 := v1.GroupResource().WithVersion("v2")
	ns := unique("diskfollow")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, v1, ns, 5, nil)
	dir := t.TempDir()
	var lists atomic.Int64
	cfg := cp.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if strings.HasSuffix(req.URL.Path, "/widgets") && strings.Contains(req.URL.Path, group) && (q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
				lists.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	leaks := controlplane.SnapshotGoroutines()
	// run starts a factory on dir, the informer by name, and waits for it
	// to be Synced at want with n objects of that version.
	run := func(want string, n int) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle) {
		t.Helper()
		f := newFactory(t, cfg, dynamicinformer.Options{CacheDir: dir})
		h, err := f.ForName(ctx, "widgets."+group)
		if err != nil {
			t.Fatal(err)
		}
		f.Start(ctx)
		eventually(t, ctx, fmt.Sprintf("Synced at %s with %d objects", want, n), func() bool {
			st := h.Status()
			if st.State != dynamicinformer.Synced || h.GVR().Version != want || st.Objects != n {
				return false
			}
			for _, o := range h.Informer().GetStore().List() {
				if o.(*unstructured.Unstructured).GetAPIVersion() != group+"/"+want {
					return false
				}
			}
			return true
		})
		return f, h
	}

	f1, h1 := run("v1", 5)
	if st := h1.Status(); st.CacheErr != nil || st.Disk.Start != dynamicinformer.DiskCold {
		t.Fatalf("first run: cache err %v, disk %+v; want kept on disk, a cold start", st.CacheErr, st.Disk)
	}
	f1.Shutdown()

	lists.Store(0)
	f2, h2 := run("v1", 5)
	if st := h2.Status(); st.Disk.Start != dynamicinformer.DiskResumed || st.Disk.Restored != 5 || lists.Load() != 0 {
		t.Fatalf("restart at v1: disk %+v, %d lists; want Resumed, 5 restored, no list", st.Disk, lists.Load())
	}
	// v2 served beside v1: the informer moves to it while running.
	setCRDVersions(t, ctx, crd.Name, group, true)
	eventually(t, ctx, "the informer follows v2", func() bool {
		st := h2.Status()
		return h2.GVR() == v2 && st.State == dynamicinformer.Synced && st.Objects == 5
	})
	// An event after the relist at v2 marks it complete on disk.
	late := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": v2.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]interface{}{"name": "late", "namespace": ns},
	}}
	if _, err := cp.Dynamic().Resource(v2).Namespace(ns).Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the new object is cached", func() bool { return h2.Status().Objects == 6 })
	f2.Shutdown()

	lists.Store(0)
	f3, h3 := run("v2", 6)
	if st := h3.Status(); st.Disk.Start != dynamicinformer.DiskResumed || st.Disk.Restored != 6 || lists.Load() != 0 {
		t.Fatalf("restart at v2: disk %+v, %d lists; want Resumed, 6 restored (stored at v2), no list", st.Disk, lists.Load())
	}
	f3.Shutdown()

	// Stored at v2; v2 no longer served while down: the restart follows
	// v1 and does not restore objects of v2.
	setCRDVersions(t, ctx, crd.Name, group, false)
	eventually(t, ctx, "discovery no longer serves v2", func() bool {
		_, err := cp.Kube().Discovery().ServerResourcesForGroupVersion(v2.GroupVersion().String())
		return err != nil
	})
	lists.Store(0)
	f4, h4 := run("v1", 6)
	// (It lists: a watch-list stream, and a LIST if the server's watch
	// cache of the CRD, made again by the CRD's update, answers the stream
	// "too many requests" while it initializes.)
	if st := h4.Status(); st.Disk.Start != dynamicinformer.DiskCold || st.Disk.Reason != "another informer spec" || st.Disk.Restored != 0 || lists.Load() == 0 {
		t.Fatalf("restart at another version: disk %+v, %d lists; want Cold, \"another informer spec\", nothing restored, a list", st.Disk, lists.Load())
	}
	f4.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// setCRDVersions makes the CRD serve v2 (storage) beside v1, or, if v2
// is false, v1 (storage) with v2 no longer served.
func setCRDVersions(t *testing.T, ctx context.Context, name, group string, v2 bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := controlplane.NewCRD(group, "Widget", "widgets", controlplane.Versions("v2", "v1"))
		if !v2 {
			next = controlplane.NewCRD(group, "Widget", "widgets", controlplane.Versions("v1", "v2"))
			next.Spec.Versions[1].Served = false
		}
		cur.Spec.Versions = next.Spec.Versions
		_, err = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
