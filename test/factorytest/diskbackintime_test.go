package factorytest

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRestartNeverBackInTime: a cache stored by a process that ran
// against a cluster is not restored when the cluster comes back with an
// older state — an etcd restored from a backup taken before the state was
// stored. The cluster's identity is the same (kube-system's UID), so only
// the resourceVersion can tell: the stored one is later than anything the
// server has written. The informer must start cold (Status.Disk Cold,
// "newer than the server"), list once, hold exactly the server's objects,
// and its handler must never see an object only the stored state had.
//
// The restored cluster is a second control plane whose etcd holds
// kube-system as the first one wrote it (its value copied at the same
// key, so the UID is the same) and a smaller revision than the first
// cluster had when the state was stored; the test checks that ordering
// before relying on it.
func TestRestartNeverBackInTime(t *testing.T) {
	// Not parallel: it starts a second control plane, which must come up
	// within its start-up bound on a machine the other tests keep busy.
	ctx := ctxT(t, 6*time.Minute)
	ns := unique("diskback")
	dir := t.TempDir()

	// The "restored" cluster: same kube-system, older history.
	old, err := controlplane.Start(ctx, controlplane.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	const ksKey = "/registry/namespaces/kube-system"
	got, err := cp.EtcdClient().Get(ctx, ksKey)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("read kube-system from the first cluster's etcd: %v (%d values)", err, len(got.Kvs))
	}
	if _, err := old.EtcdClient().Put(ctx, ksKey, string(got.Kvs[0].Value)); err != nil {
		t.Fatal(err)
	}
	ks, err := cp.Kube().CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the restored cluster serves the first cluster's kube-system", func() bool {
		n, err := old.Kube().CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		return err == nil && n.UID == ks.UID
	})
	// The restored cluster has the namespace and 5 of the 20 configmaps,
	// with other data.
	if err := old.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := old.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
			Data: map[string]string{"restored": "yes"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oldRV := serverRV(t, ctx, old)

	// The first cluster: its history must reach past the restored one's,
	// as a cluster's does after the backup it is later restored from.
	for serverRV(t, ctx, cp) <= oldRV+100 {
		for i := 0; i < 50; i++ {
			if _, err := cp.EtcdClient().Put(ctx, "/informerkit-test-revision-bump", strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	seedConfigMaps(t, ctx, cp.Kube(), ns)
	f1, h1, _, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	if st := h1.Status(); st.Objects != 20 || st.CacheErr != nil {
		t.Fatalf("first run: %+v", st)
	}
	f1.Shutdown()
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.v1-*.snap"))
	if len(files) != 1 {
		t.Fatalf("stored files %v", files)
	}
	storedAt := serverRV(t, ctx, cp)
	if oldRV := serverRV(t, ctx, old); storedAt <= oldRV {
		t.Fatalf("setup: the first cluster is at %d, not past the restored one's %d", storedAt, oldRV)
	}

	leaks := controlplane.SnapshotGoroutines()
	cfg := old.Config()
	counter := &collectionRequests{ns: ns}
	cfg.Wrap(counter.wrap)
	f2 := newFactory(t, cfg, dynamicinformer.Options{CacheDir: dir})
	defer f2.Shutdown()
	h2 := f2.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	rec := newInitialRecorder()
	reg, err := h2.Informer().AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	f2.Start(ctx)
	if !f2.WaitForCacheSync(ctx)[configmaps] {
		t.Fatalf("not synced on the restored cluster: %+v", h2.Status())
	}
	eventually(t, ctx, "handler synced", reg.HasSynced)

	st := h2.Status()
	lists, _ := counter.counts()
	initial, added, updated, deleted, _ := rec.seen()
	t.Logf("restored cluster at %d, stored state at about %d: disk %+v, %d lists, handler %d initial adds, adds %v, updates %v, deletes %v",
		oldRV, storedAt, st.Disk, lists, initial, added, updated, deleted)
	if st.Disk.Start != dynamicinformer.DiskCold || st.Disk.Reason != "newer than the server" || st.Restored != 0 || st.CacheErr != nil {
		t.Errorf("disk status %+v, restored %d, cache err %v; want Cold, \"newer than the server\", 0 restored, no error", st.Disk, st.Restored, st.CacheErr)
	}
	if lists != 1 {
		t.Errorf("%d lists, want 1 (a cold start)", lists)
	}
	if initial != 5 || len(added) != 0 || len(updated) != 0 || len(deleted) != 0 {
		t.Errorf("handler saw %d initial adds, adds %v, updates %v, deletes %v; want the restored cluster's 5 objects only", initial, added, updated, deleted)
	}
	// The cache is the restored cluster's state, object for object.
	l, err := old.Kube().CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want, have []string
	for _, cm := range l.Items {
		want = append(want, cm.Namespace+"/"+cm.Name+"@"+cm.ResourceVersion)
	}
	for _, o := range h2.Informer().GetStore().List() {
		k, rv := key(o)
		have = append(have, k+"@"+rv)
	}
	sort.Strings(want)
	sort.Strings(have)
	if fmt.Sprint(want) != fmt.Sprint(have) {
		t.Errorf("cache %v, server %v", have, want)
	}
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// serverRV is the resourceVersion of a consistent list on c's server, as
// a number (etcd's revision).
func serverRV(t *testing.T, ctx context.Context, c *controlplane.ControlPlane) int64 {
	t.Helper()
	l, err := c.Kube().CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", l.ResourceVersion, err)
	}
	return rv
}
