package factorytest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// collectionRequests counts, at the transport, the requests for the
// configmaps of one namespace: lists (a LIST, or a watch-list stream,
// sendInitialEvents=true) and plain watches.
type collectionRequests struct {
	ns string

	mu             sync.Mutex // guards lists, watchLists, watches
	lists, watches int
	watchLists     int
}

func (c *collectionRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/namespaces/"+c.ns+"/configmaps") {
			q := req.URL.Query()
			c.mu.Lock()
			switch {
			case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
				c.watchLists++
			case q.Get("watch") == "true":
				c.watches++
			default:
				c.lists++
			}
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// listsOf returns the lists (LIST or watch-list) and watches sent.
func (c *collectionRequests) counts() (lists, watches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists + c.watchLists, c.watches
}

// initialRecorder records what a handler sees, initial-list adds apart.
type initialRecorder struct {
	*recorder
	mu       sync.Mutex // guards initial, added, updated, deleted
	initial  int
	added    []string
	updated  []string
	deleted  []string
	noChange int // updates whose resourceVersion did not change
}

func newInitialRecorder() *initialRecorder { return &initialRecorder{recorder: newRecorder()} }

func (r *initialRecorder) OnAdd(o interface{}, initial bool) {
	r.recorder.OnAdd(o, initial)
	k, _ := key(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if initial {
		r.initial++
	} else {
		r.added = append(r.added, k)
	}
}

func (r *initialRecorder) OnUpdate(old, o interface{}) {
	r.recorder.OnUpdate(old, o)
	k, rv := key(o)
	_, oldRV := key(old)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updated = append(r.updated, k)
	if rv == oldRV {
		r.noChange++
	}
}

func (r *initialRecorder) OnDelete(o interface{}) {
	r.recorder.OnDelete(o)
	k, _ := key(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, k)
}

func (r *initialRecorder) seen() (initial int, added, updated, deleted []string, noChange int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := func(l []string) []string { l = append([]string(nil), l...); sort.Strings(l); return l }
	return r.initial, s(r.added), s(r.updated), s(r.deleted), r.noChange
}

// diskRun starts a factory on dir with a recorder on the namespace's
// configmaps, and waits for Synced.
func diskRun(t *testing.T, ctx context.Context, dir, ns string, opts dynamicinformer.Options) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder, *collectionRequests) {
	t.Helper()
	counters := []*collectionRequests{{ns: ns}}
	f, h, rec := diskStart(t, ctx, dir, opts, counters)
	return f, h, rec, counters[0]
}

// diskStart starts a factory on dir, whose transport counts the requests
// of each counter's namespace, with a recorder on the configmaps of those
// namespaces, and waits for Synced.
//
// ropts, if given, replace WithNamespaces of the counters' namespaces.
func diskStart(t *testing.T, ctx context.Context, dir string, opts dynamicinformer.Options, counters []*collectionRequests, ropts ...dynamicinformer.ResourceOption) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder) {
	t.Helper()
	return diskStartAs(t, ctx, cp.Config(), dir, opts, counters, ropts...)
}

// diskStartAs is diskStart with the client configuration cfg.
func diskStartAs(t *testing.T, ctx context.Context, cfg *rest.Config, dir string, opts dynamicinformer.Options, counters []*collectionRequests, ropts ...dynamicinformer.ResourceOption) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder) {
	t.Helper()
	var nss []string
	for _, c := range counters {
		cfg.Wrap(c.wrap)
		nss = append(nss, c.ns)
	}
	opts.CacheDir = dir
	f := newFactory(t, cfg, opts)
	if len(ropts) == 0 {
		ropts = []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nss...)}
	}
	h := f.ForResource(configmaps, ropts...)
	rec := newInitialRecorder()
	reg, err := h.Informer().AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[configmaps] {
		t.Fatalf("not synced: status %+v", h.Status())
	}
	// The handler has had the initial list.
	eventually(t, ctx, "handler synced", reg.HasSynced)
	return f, h, rec
}

// diskStartCounted is diskStartAs with a request counter per namespace
// of nss; lists returns the lists sent to them (LIST or watch-list).
func diskStartCounted(t *testing.T, ctx context.Context, cfg *rest.Config, dir string, nss []string, ropts ...dynamicinformer.ResourceOption) (f *dynamicinformer.Factory, h *dynamicinformer.InformerHandle, rec *initialRecorder, lists func() int) {
	t.Helper()
	var counters []*collectionRequests
	for _, ns := range nss {
		counters = append(counters, &collectionRequests{ns: ns})
	}
	f, h, rec = diskStartAs(t, ctx, cfg, dir, dynamicinformer.Options{}, counters, ropts...)
	lists = func() int {
		n := 0
		for _, c := range counters {
			l, _ := c.counts()
			n += l
		}
		return n
	}
	return f, h, rec, lists
}

// changeWhileDown creates 3 configmaps, updates 2 and deletes 2 of the
// 20 made by seedConfigMaps.
func changeWhileDown(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) (added, updated, deleted []string) {
	t.Helper()
	for i := 20; i < 23; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		added = append(added, fmt.Sprintf("%s/cm-%d", ns, i))
	}
	for i := 0; i < 2; i++ {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"changed": "yes"}
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		updated = append(updated, fmt.Sprintf("%s/cm-%d", ns, i))
	}
	for i := 2; i < 4; i++ {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, fmt.Sprintf("%s/cm-%d", ns, i))
	}
	sort.Strings(added)
	sort.Strings(updated)
	sort.Strings(deleted)
	return added, updated, deleted
}

func seedConfigMaps(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) {
	t.Helper()
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
			Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitSeen waits until the handler saw what changed while down (the
// watch delivers it after Synced).
func waitSeen(t *testing.T, ctx context.Context, rec *initialRecorder, adds, updates, deletes int) {
	t.Helper()
	eventually(t, ctx, "the changes made while down reach the handler", func() bool {
		_, a, u, d, _ := rec.seen()
		return len(a) >= adds && len(u) >= updates && len(d) >= deletes
	})
}

// TestRestartResumesFromDisk: an informer with a cache directory is shut
// down; 3 configmaps are created, 2 updated and 2 deleted; a new factory
// on the same directory restores the 20 stored objects (handlers see 20
// initial-list adds), sends no list, and its watch delivers exactly the
// 7 changes.
func TestRestartResumesFromDisk(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("disk")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	f1, h1, rec1, c1 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	if st := h1.Status(); st.Restored != 0 || st.CacheErr != nil || st.Objects != 20 || st.Disk.Start != dynamicinformer.DiskCold || st.Disk.Reason != "none stored" {
		t.Fatalf("first run: %+v", st)
	}
	if lists, _ := c1.counts(); lists != 1 {
		t.Fatalf("first run: %d lists, want 1", lists)
	}
	if initial, _, _, _, _ := rec1.seen(); initial != 20 {
		t.Fatalf("first run: %d initial adds", initial)
	}
	f1.Shutdown()
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.v1-*.snap"))
	if len(files) != 1 {
		t.Fatalf("stored files %v", files)
	}

	added, updated, deleted := changeWhileDown(t, ctx, kube, ns)

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	waitSeen(t, ctx, rec2, 3, 2, 2)
	converged(t, ctx, h2, rec2.recorder, ns)
	initial, a, u, d, noChange := rec2.seen()
	lists, watches := c2.counts()
	st := h2.Status()
	t.Logf("restart: %d restored, %d lists, %d watches; handler: %d initial, adds %v, updates %v, deletes %v", st.Restored, lists, watches, initial, a, u, d)
	if lists != 0 {
		t.Errorf("restart sent %d lists, want 0", lists)
	}
	if st.Restored != 20 || st.CacheErr != nil || initial != 20 {
		t.Errorf("restored %d (cache err %v), initial adds %d; want 20, nil, 20", st.Restored, st.CacheErr, initial)
	}
	if st.Disk.Start != dynamicinformer.DiskResumed || st.Disk.Restored != 20 || st.Disk.Age <= 0 || st.Disk.Written <= 0 {
		t.Errorf("disk status %+v; want Resumed, 20 restored, an age, bytes written", st.Disk)
	}
	if fmt.Sprint(a) != fmt.Sprint(added) || fmt.Sprint(u) != fmt.Sprint(updated) || fmt.Sprint(d) != fmt.Sprint(deleted) || noChange != 0 {
		t.Errorf("handler saw adds %v updates %v (%d unchanged) deletes %v; want %v %v %v", a, u, noChange, d, added, updated, deleted)
	}
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestRestartAfterCompactionDiffs: as TestRestartResumesFromDisk, but
// etcd is compacted while the process is down, so the watch from the
// stored resourceVersion answers 410: the informer lists once, and
// handlers still see only the 7 real changes (client-go's Replace against
// the restored store), no update for an unchanged object.
func TestRestartAfterCompactionDiffs(t *testing.T) {
	// Not parallel: it compacts the shared etcd (other tests' watches from older revisions would get 410).
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskcompact")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	f1, _, _, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	f1.Shutdown()
	added, updated, deleted := changeWhileDown(t, ctx, kube, ns)
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	waitSeen(t, ctx, rec2, 3, 2, 2)
	converged(t, ctx, h2, rec2.recorder, ns)
	initial, a, u, d, noChange := rec2.seen()
	lists, _ := c2.counts()
	st := h2.Status()
	t.Logf("restart after compaction: %d restored, %d lists; handler: %d initial, adds %v, updates %v, deletes %v", st.Restored, lists, initial, a, u, d)
	if lists != 1 {
		t.Errorf("restart sent %d lists, want 1 (after the 410)", lists)
	}
	if st.Restored != 20 || initial != 20 {
		t.Errorf("restored %d, initial adds %d; want 20, 20", st.Restored, initial)
	}
	if st.Disk.Start != dynamicinformer.DiskDiffed {
		t.Errorf("disk status %+v; want Diffed", st.Disk)
	}
	if fmt.Sprint(a) != fmt.Sprint(added) || fmt.Sprint(u) != fmt.Sprint(updated) || fmt.Sprint(d) != fmt.Sprint(deleted) || noChange != 0 {
		t.Errorf("handler saw adds %v updates %v (%d unchanged) deletes %v; want %v %v %v", a, u, noChange, d, added, updated, deleted)
	}
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestDiskCacheFaults: a damaged snapshot is ignored (the informer lists,
// handlers see a cold start); a second factory on a locked directory runs
// without it (Status.CacheErr is ErrCache wrapping ErrLocked... as text);
// Secrets are not written without CacheSecrets.
func TestDiskCacheFaults(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskfault")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	f1, _, _, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	f1.Shutdown()
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.v1-*.snap"))
	if len(files) != 1 {
		t.Fatalf("stored files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	initial, _, _, _, _ := rec2.seen()
	if lists, _ := c2.counts(); lists != 1 || initial != 20 || h2.Status().Restored != 0 || h2.Status().CacheErr != nil {
		t.Fatalf("after damage: %d lists, %d initial adds, status %+v; want a cold start that keeps writing", lists, initial, h2.Status())
	}
	if ds := h2.Status().Disk; ds.Start != dynamicinformer.DiskCold || ds.Reason != "corrupt" {
		t.Fatalf("after damage: disk status %+v; want Cold, corrupt", ds)
	}

	// The directory is held by f2: another factory runs without it.
	f3, h3, _, c3 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	st := h3.Status()
	if !errors.Is(st.CacheErr, dynamicinformer.ErrCache) || !strings.Contains(st.CacheErr.Error(), "locked") {
		t.Fatalf("second factory on the directory: CacheErr %v", st.CacheErr)
	}
	if lists, _ := c3.counts(); lists != 1 || st.Objects != 20 {
		t.Fatalf("second factory: %d lists, %d objects", lists, st.Objects)
	}
	f3.Shutdown()
	f2.Shutdown()

	// Secrets are not kept unless asked for.
	secrets := dynamicinformer.Options{CacheDir: dir}
	f4 := newFactory(t, cp.Config(), secrets)
	secretsGVR := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	h4 := f4.ForResource(secretsGVR, dynamicinformer.WithNamespaces(ns))
	f4.Start(ctx)
	if !f4.WaitForCacheSync(ctx)[secretsGVR] {
		t.Fatalf("secrets not synced: %+v", h4.Status())
	}
	f4.Shutdown()
	if files, _ := filepath.Glob(filepath.Join(dir, "secrets.*")); len(files) != 0 {
		t.Fatalf("secrets written without CacheSecrets: %v", files)
	}
	leaks.VerifyNoLeaks(t)
}

// TestRestartAfterImmediateShutdown: a factory shut down as soon as it
// has synced stores every object of its first list. client-go drops the
// notifications a handler has not been given when the informer stops, and
// the first list's objects come in no order of resourceVersion: a journal
// missing some of them would be stored at the resourceVersion of the
// others, and the restart, resuming from there, would never see the
// missing ones.
func TestRestartAfterImmediateShutdown(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskquick")
	kube := cp.Kube()
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const n = 200
	data := map[string]string{"v": strings.Repeat("x", 8<<10)}
	for i := 0; i < n; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	f1 := newFactory(t, cp.Config(), dynamicinformer.Options{CacheDir: dir})
	h1 := f1.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	f1.Start(ctx)
	if !f1.WaitForCacheSync(ctx)[configmaps] {
		t.Fatalf("not synced: %+v", h1.Status())
	}
	f1.Shutdown()

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	lists, _ := c2.counts()
	if st := h2.Status(); st.Restored != n || st.CacheErr != nil || lists != 0 {
		t.Fatalf("restart: restored %d (cache err %v), %d lists; want %d, nil, 0", st.Restored, st.CacheErr, lists, n)
	}
	converged(t, ctx, h2, rec2.recorder, ns)
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// crdRun starts a factory on dir with a recorder on gvr in ns; it does
// not wait for Synced (a removed resource never syncs).
func crdRun(t *testing.T, ctx context.Context, dir string, gvr schema.GroupVersionResource, ns string) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder) {
	t.Helper()
	f := newFactory(t, cp.Config(), dynamicinformer.Options{CacheDir: dir})
	h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	rec := newInitialRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	return f, h, rec
}

// TestRestartAfterCRDDeleted: a CRD deleted while the process was down
// gives Removed on start — handlers get the 5 stored objects as
// initial-list adds, then a delete each — not a silent cold start; the
// informer follows the CRD when it is installed again. Then a CRD
// deleted and created again (a new UID) while down: the stored objects
// are not served as current — handlers get them as initial adds and
// deletes, then the new instance's object as an add (deletes+adds, as
// if the process had watched it happen). Before the fix both were cold
// starts: no delete reached the handlers, Status.Disk did not exist.
func TestRestartAfterCRDDeleted(t *testing.T) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 6*time.Minute)
	gvr, name := installCRD(t, ctx)
	ns := unique("diskcrd")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 5, nil)
	dir := t.TempDir()
	keys := func(n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("%s/w-%d", ns, i))
		}
		sort.Strings(out)
		return out
	}

	f1, h1, _ := crdRun(t, ctx, dir, gvr, ns)
	eventually(t, ctx, "first run Synced", func() bool { return h1.Status().State == dynamicinformer.Synced })
	f1.Shutdown()
	if err := cp.DeleteCRD(ctx, name); err != nil {
		t.Fatal(err)
	}

	f2, h2, rec2 := crdRun(t, ctx, dir, gvr, ns)
	defer f2.Shutdown()
	eventually(t, ctx, "Removed with a delete per stored object", func() bool {
		_, _, _, d, _ := rec2.seen()
		return h2.Status().State == dynamicinformer.Removed && len(d) == 5
	})
	initial, a, u, d, _ := rec2.seen()
	st := h2.Status()
	t.Logf("CRD deleted while down: %+v; handler %d initial, adds %v, updates %v, deletes %v", st.Disk, initial, a, u, d)
	if initial != 5 || len(a) != 0 || len(u) != 0 || fmt.Sprint(d) != fmt.Sprint(keys(5)) {
		t.Errorf("handler saw %d initial, adds %v, updates %v, deletes %v; want 5, none, none, %v", initial, a, u, d, keys(5))
	}
	if st.Disk.Start != dynamicinformer.DiskRemoved || st.Restored != 5 || !errors.Is(st.Err, dynamicinformer.ErrNotServed) || st.Objects != 0 {
		t.Errorf("status %+v (disk %+v); want Removed (ErrNotServed), DiskRemoved, 5 restored, empty", st, st.Disk)
	}
	// Installed again: the informer serves the new instance.
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(gvr.Group, "Widget", "widgets")); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "Synced again", func() bool { return h2.Status().State == dynamicinformer.Synced })
	createN(t, ctx, gvr, ns, 2, nil)
	eventually(t, ctx, "the new objects", func() bool { _, a, _, _, _ := rec2.seen(); return len(a) == 2 })
	f2.Shutdown()

	// Deleted and created again while down: 2 objects stored (of the
	// second instance); the third holds one, w-0, of the same name.
	if err := cp.DeleteCRD(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(gvr.Group, "Widget", "widgets")); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 1, nil)
	f3, h3, rec3 := crdRun(t, ctx, dir, gvr, ns)
	defer f3.Shutdown()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		_, a, _, d, _ := rec3.seen()
		return h3.Status().State == dynamicinformer.Synced && len(d) == 2 && len(a) == 1, nil
	}); err != nil {
		initial, a, u, d, _ := rec3.seen()
		t.Fatalf("timed out waiting for Synced, the old objects deleted and the new one added: status %+v; handler %d initial, adds %v, updates %v, deletes %v", h3.Status(), initial, a, u, d)
	}
	convergedResource(t, ctx, h3, rec3.recorder, gvr, ns)
	initial, a, u, d, _ = rec3.seen()
	st = h3.Status()
	t.Logf("CRD re-created while down: %+v; handler %d initial, adds %v, updates %v, deletes %v", st.Disk, initial, a, u, d)
	if initial != 2 || fmt.Sprint(d) != fmt.Sprint(keys(2)) || fmt.Sprint(a) != fmt.Sprint(keys(1)) || len(u) != 0 {
		t.Errorf("handler saw %d initial, adds %v, updates %v, deletes %v; want 2, %v, none, %v", initial, a, u, d, keys(1), keys(2))
	}
	if st.Disk.Start != dynamicinformer.DiskRemoved || !strings.Contains(st.Disk.Reason, "created again") || st.Objects != 1 {
		t.Errorf("disk %+v, %d objects; want DiskRemoved (created again), 1 object", st.Disk, st.Objects)
	}
	f3.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestRestartSeveralNamespacesDiffs: an informer over two namespaces is
// kept on disk too. Its merged watch cannot be resumed from one
// resourceVersion, so a restart restores the 40 stored objects (initial
// adds), lists each namespace once, and its handlers see only the 14
// changes made while it was down (Disk.Start Diffed, with the reason).
func TestRestartSeveralNamespacesDiffs(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	nss := []string{unique("diskmany"), unique("diskmany")}
	kube := cp.Kube()
	for _, ns := range nss {
		seedConfigMaps(t, ctx, kube, ns)
	}
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()
	run := func() (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder, func() int) {
		return diskStartCounted(t, ctx, cp.Config(), dir, nss)
	}

	f1, h1, rec1, lists1 := run()
	if st := h1.Status(); st.Objects != 40 || st.CacheErr != nil || st.Disk.Start != dynamicinformer.DiskCold {
		t.Fatalf("first run: %+v", st)
	}
	if initial, _, _, _, _ := rec1.seen(); initial != 40 || lists1() != 2 {
		t.Fatalf("first run: %d initial adds, %d lists; want 40, 2", initial, lists1())
	}
	f1.Shutdown()

	var added, updated, deleted []string
	for _, ns := range nss {
		a, u, d := changeWhileDown(t, ctx, kube, ns)
		added, updated, deleted = append(added, a...), append(updated, u...), append(deleted, d...)
	}
	sort.Strings(added)
	sort.Strings(updated)
	sort.Strings(deleted)

	f2, h2, rec2, lists2 := run()
	defer f2.Shutdown()
	waitSeen(t, ctx, rec2, 6, 4, 4)
	// The cache is the server's state of both namespaces.
	var server []string
	for _, ns := range nss {
		l, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			server = append(server, o.Namespace+"/"+o.Name+"@"+o.ResourceVersion)
		}
	}
	sort.Strings(server)
	eventually(t, ctx, "the cache equals the server", func() bool {
		var cache []string
		for _, o := range h2.Informer().GetStore().List() {
			k, rv := key(o)
			cache = append(cache, k+"@"+rv)
		}
		sort.Strings(cache)
		return fmt.Sprint(cache) == fmt.Sprint(server)
	})
	initial, a, u, d, noChange := rec2.seen()
	st := h2.Status()
	t.Logf("restart over two namespaces: %d restored, %d lists; handler: %d initial, adds %v, updates %v, deletes %v; disk %+v",
		st.Restored, lists2(), initial, a, u, d, st.Disk)
	if lists2() != 2 {
		t.Errorf("restart sent %d lists, want one per namespace (2)", lists2())
	}
	if st.Restored != 40 || initial != 40 || st.CacheErr != nil {
		t.Errorf("restored %d, initial adds %d, cache err %v; want 40, 40, nil", st.Restored, initial, st.CacheErr)
	}
	if st.Disk.Start != dynamicinformer.DiskDiffed || st.Disk.Reason == "" {
		t.Errorf("disk status %+v; want Diffed with a reason", st.Disk)
	}
	if fmt.Sprint(a) != fmt.Sprint(added) || fmt.Sprint(u) != fmt.Sprint(updated) || fmt.Sprint(d) != fmt.Sprint(deleted) || noChange != 0 {
		t.Errorf("handler saw adds %v updates %v (%d unchanged) deletes %v; want %v %v %v", a, u, noChange, d, added, updated, deleted)
	}
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}
