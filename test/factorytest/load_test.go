package factorytest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// envInt reads a size from the environment (the load tests' knobs).
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// parallel runs fn(i) for i in [0,n) on workers goroutines (client-go's
// workqueue.ParallelizeUntil) and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var first error
	var once sync.Once
	workqueue.ParallelizeUntil(context.Background(), workers, n, func(i int) {
		if err := fn(i); err != nil {
			once.Do(func() { first = err })
		}
	})
	return first
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestManyCRDs: one factory watches INFORMERKIT_LOAD_CRDS CRDs at once
// (default 20, 40 with INFORMERKIT_LONG; the 200 with
// INFORMERKIT_LOAD_CRDS=200). Every
// informer syncs and holds its object; goroutines per informer are
// reported. The default is smaller because installing a CRD under -race
// on 2 cores takes about a second (the API server builds a handler and
// republishes discovery and OpenAPI for each), which would put 200 above
// the CI budget.
func TestManyCRDs(t *testing.T) {
	// Not parallel: it measures the process's goroutines and heap.
	if testing.Short() {
		t.Skip("load test")
	}
	n := envInt(t, "INFORMERKIT_LOAD_CRDS", controlplane.Sized(20, 40))
	ctx := ctxT(t, 30*time.Minute)
	sc := scenario(t)
	ns := unique("many")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	prefix := unique("m")
	gvrs := make([]schema.GroupVersionResource, n)
	start := time.Now()
	err := parallel(n, 4, func(i int) error {
		crd := controlplane.NewCRD(fmt.Sprintf("%s-%d.load.example.com", prefix, i), "Widget", "widgets")
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return err
		}
		gvrs[i] = controlplane.GVR(crd)
		o := obj(gvrs[i].GroupVersion().String(), "Widget", ns, "w", nil)
		_, err := cp.Dynamic().Resource(gvrs[i]).Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	install := time.Since(start)
	leaks := controlplane.SnapshotGoroutines()
	base, baseAll := informerGoroutines(), runtime.NumGoroutine()
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	handles := make([]*dynamicinformer.InformerHandle, n)
	for i, gvr := range gvrs {
		handles[i] = f.ForResource(gvr)
	}
	start = time.Now()
	f.Start(ctx)
	for i, h := range handles {
		eventually(t, ctx, gvrs[i].Group+" synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	}
	synced := time.Since(start)
	for i, h := range handles {
		if got := len(h.Informer().GetStore().ListKeys()); got != 1 {
			t.Fatalf("%s: %d objects cached, want 1", gvrs[i], got)
		}
	}
	perInformer := float64(informerGoroutines()-base) / float64(n)
	perInformerAll := float64(runtime.NumGoroutine()-baseAll) / float64(n)
	t.Logf("%d CRDs installed in %v (4 at a time), %d informers synced in %v, %.1f informerkit goroutines per informer (%.1f process-wide, incl. the API server's side of each watch), heap %.0f MiB (whole process)",
		n, install.Round(time.Second), n, synced.Round(time.Millisecond), perInformer, perInformerAll, heapMiB())
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("%d CRDs (installed in %v, 4 at a time), one object each, watched by one factory", n, install.Round(time.Second))
	sc.Held("all %d informers Synced in %v holding their object; goroutines per informer: %.1f with informerkit frames, %.1f process-wide (incl. client-go's and the in-process API server's side of each watch); no goroutine leak",
		n, synced.Round(time.Millisecond), perInformer, perInformerAll)
}

// TestManyObjects: INFORMERKIT_LOAD_OBJECTS configmaps (default 1000,
// 2000 with INFORMERKIT_LONG; the 100k does not fit in an
// in-process API server under -race on 2 cores) in one namespace, then
// updates by 8 writers as fast as the server takes them for
// INFORMERKIT_LOAD_SECONDS (default 5, 20 with INFORMERKIT_LONG). The cache and a
// handler converge to the server; heap after the initial sync and at the
// end are reported (whole process: the API server and etcd share it).
func TestManyObjects(t *testing.T) {
	// Not parallel: it loads the server as hard as it takes, and measures the process's heap.
	if testing.Short() {
		t.Skip("load test")
	}
	n := envInt(t, "INFORMERKIT_LOAD_OBJECTS", controlplane.Sized(1000, 2000))
	secs := envInt(t, "INFORMERKIT_LOAD_SECONDS", controlplane.Sized(5, 20))
	ctx := ctxT(t, 30*time.Minute)
	sc := scenario(t)
	ns := unique("load")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	direct := kubernetes.NewForConfigOrDie(cp.DirectConfig())
	start := time.Now()
	payload := strings.Repeat("x", 256)
	err := parallel(n, 8, func(i int) error {
		_, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Labels: map[string]string{"shard": fmt.Sprint(i % 10)}},
			Data:       map[string]string{"payload": payload},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	syncTook := time.Since(start)
	heapSynced := heapMiB()
	// Updates for secs seconds.
	var updates, errs atomic.Int64
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i += 8 {
				patch := fmt.Sprintf(`{"data":{"n":"%d"}}`, i)
				if _, err := direct.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%06d", i%n), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					errs.Add(1)
				} else {
					updates.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	rate := float64(updates.Load()) / float64(secs)
	start = time.Now()
	objects := converged(t, ctx, h, rec, ns)
	convergedAfter := time.Since(start)
	heapEnd := heapMiB()
	_, adds, ups, dels := rec.snapshot()
	t.Logf("%d objects created in %v; synced in %v; %d updates in %d s (%.0f/s, %d errors); converged %v after the writes stopped; handler %d adds %d updates %d deletes; heap %.0f MiB after sync, %.0f MiB at the end (whole process)",
		n, created.Round(time.Second), syncTook.Round(time.Millisecond), updates.Load(), secs, rate, errs.Load(), convergedAfter.Round(time.Millisecond), adds, ups, dels, heapSynced, heapEnd)
	if objects != n || int64(ups) < updates.Load() {
		t.Fatalf("%d objects (want %d), handler saw %d updates of %d written", objects, n, ups, updates.Load())
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("%d configmaps (256 B payload), then %d updates in %d s by 8 writers (%.0f/s, what this machine held under -race)", n, updates.Load(), secs, rate)
	sc.Held("synced in %v; converged %v after the writes stopped (%d objects, handler saw every update: %d); heap %.0f MiB after sync, %.0f MiB at the end (whole process incl. API server); no goroutine leak",
		syncTook.Round(time.Millisecond), convergedAfter.Round(time.Millisecond), objects, ups, heapSynced, heapEnd)
}

// TestStorageVersionConversionUnderLoad: while writers update objects of a
// CRD through v1, the CRD gets a v2 that becomes the storage version (v1
// still served, conversion None). The informer on v1 keeps converging.
func TestStorageVersionConversionUnderLoad(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	sc := scenario(t)
	crd := controlplane.NewCRD(unique("conv")+".factory.example.com", "Widget", "widgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	v1 := controlplane.GVR(crd)
	ns := unique("conv")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const objs = 30
	createN(t, ctx, v1, ns, objs, nil)
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	h := f.ForResource(v1)
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	eventually(t, ctx, "synced", func() bool { return h.Status().State == dynamicinformer.Synced })
	// Writers: patch objects through v1 until told to stop.
	wctx, stopWriters := context.WithCancel(ctx)
	var writes, writeErrs atomic.Int64
	var wg sync.WaitGroup
	dyn := cp.Dynamic()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; wctx.Err() == nil; i += 4 {
				patch := fmt.Sprintf(`{"spec":{"n":%d}}`, i)
				if _, err := dyn.Resource(v1).Namespace(ns).Patch(wctx, fmt.Sprintf("w-%d", i%objs), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					if wctx.Err() == nil {
						writeErrs.Add(1)
					}
				} else {
					writes.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(3 * time.Second)
	before := writes.Load()
	// v2 served and storage, v1 still served; conversion None.
	converted := crd.DeepCopy()
	converted.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		crd.Spec.Versions[0], *crd.Spec.Versions[0].DeepCopy(),
	}
	converted.Spec.Versions[0].Storage = false
	converted.Spec.Versions[1].Name = "v2"
	converted.Spec.Versions[1].Storage = true
	converted.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	if err := cp.InstallCRD(ctx, converted); err != nil {
		stopWriters()
		t.Fatal(err)
	}
	// Rewrite every object so it is stored at v2, writes continuing.
	v2 := schema.GroupVersionResource{Group: v1.Group, Version: "v2", Resource: v1.Resource}
	for i := 0; i < objs; i++ {
		if _, err := dyn.Resource(v2).Namespace(ns).Patch(ctx, fmt.Sprintf("w-%d", i), types.MergePatchType, []byte(`{"metadata":{"annotations":{"stored":"v2"}}}`), metav1.PatchOptions{}); err != nil {
			stopWriters()
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	stopWriters()
	wg.Wait()
	n := convergedResource(t, ctx, h, rec, v1, "")
	for _, o := range h.Informer().GetStore().List() {
		u := o.(interface{ GetAPIVersion() string })
		if u.GetAPIVersion() != v1.GroupVersion().String() {
			t.Fatalf("cached object at %s, want %s", u.GetAPIVersion(), v1.GroupVersion())
		}
	}
	st := h.Status()
	if st.State != dynamicinformer.Synced {
		t.Fatalf("status %+v", st)
	}
	_, _, updates, deletes := rec.snapshot()
	if deletes != 0 {
		t.Fatalf("%d deletes seen through a storage-version change", deletes)
	}
	t.Logf("%d writes through v1 (%d before the change, %d errors); converged on %d objects; handler %d updates, 0 deletes; state %s",
		writes.Load(), before, writeErrs.Load(), n, updates, st.State)
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("CRD gets v2 as served+storage version (v1 still served, conversion None) while 4 writers patch through v1; every object rewritten through v2; %d writes, %d errors", writes.Load(), writeErrs.Load())
	sc.Held("informer on v1 stayed Synced and converged (%d objects at v1, at the server's resourceVersions); handler saw %d updates and no deletes; no goroutine leak", n, updates)
}
