package controllertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/subscription"
	"github.com/informerkit/informerkit/test/controlplane"
)

// quiet is how long a test watches for calls that must not happen.
const quiet = 2 * time.Second

// TestReconcileOnceThenPerChange: N objects across 3 CRDs are reconciled
// exactly once each after sync, then once per change (update, delete),
// with the cached object (or gone) in the request.
func TestReconcileOnceThenPerChange(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	leaks := controlplane.SnapshotGoroutines()
	ns := newNamespace(t, ctx)
	const perCRD = 30
	var gvrs []schema.GroupVersionResource
	var keys []controller.Key
	for range 3 {
		gvr, _ := installCRD(t, ctx)
		gvrs = append(gvrs, gvr)
		keys = append(keys, createN(t, ctx, gvr, ns, perCRD)...)
	}

	f := newFactory(t, cp.Config())
	j := newJournal()
	c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		j.record(req)
		return nil
	}), controller.Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range gvrs {
		h := handle(t, f, gvr)
		defer h.Release()
		if err := c.Watch(h); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx)
	stop := running(t, ctx, c)

	eventually(t, ctx, "every object reconciled", func() bool { return len(j.countsNot(keys, 1)) == 0 })
	time.Sleep(quiet)
	if bad := j.countsNot(keys, 1); len(bad) > 0 {
		t.Fatalf("after sync, want exactly one reconcile per object; got %v", bad)
	}
	for _, k := range keys {
		if c := j.of(k)[0]; c.gone {
			t.Errorf("%s reconciled as gone after sync", k)
		}
	}

	// One change per object: update 5 objects of each CRD, delete 3 others.
	var updated, deleted, untouched []controller.Key
	for i, k := range keys {
		switch n := i % perCRD; {
		case n < 5:
			updated = append(updated, k)
		case n < 8:
			deleted = append(deleted, k)
		default:
			untouched = append(untouched, k)
		}
	}
	rvs := map[controller.Key]string{}
	for _, k := range updated {
		r := cp.Dynamic().Resource(k.GVR).Namespace(k.Namespace)
		u, err := r.Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, "changed", "spec", "value")
		u, err = r.Update(ctx, u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs[k] = u.GetResourceVersion()
	}
	for _, k := range deleted {
		if err := cp.Dynamic().Resource(k.GVR).Namespace(k.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, ctx, "every change reconciled", func() bool {
		return len(j.countsNot(updated, 2)) == 0 && len(j.countsNot(deleted, 2)) == 0
	})
	time.Sleep(quiet)
	for _, check := range []struct {
		keys []controller.Key
		n    int
	}{{updated, 2}, {deleted, 2}, {untouched, 1}} {
		if bad := j.countsNot(check.keys, check.n); len(bad) > 0 {
			t.Errorf("want %d reconciles: %v", check.n, bad)
		}
	}
	for _, k := range updated {
		if c := j.of(k); len(c) == 2 && (c[1].gone || c[1].rv != rvs[k]) {
			t.Errorf("%s: second reconcile saw gone=%v rv=%s, want the updated object rv=%s", k, c[1].gone, c[1].rv, rvs[k])
		}
	}
	for _, k := range deleted {
		if c := j.of(k); len(c) == 2 && !c[1].gone {
			t.Errorf("%s: reconcile after delete did not see it gone", k)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := c.Stats()
	if want := int64(len(keys) + len(updated) + len(deleted)); st.Reconciled != want || st.Failed != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v, want Reconciled=%d and no failures or drops", st, want)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// recordingLimiter records the delay its inner limiter gives each retry.
type recordingLimiter struct {
	workqueue.TypedRateLimiter[controller.Key]
	mu     sync.Mutex // guards delays
	delays []time.Duration
}

func (l *recordingLimiter) When(k controller.Key) time.Duration {
	d := l.TypedRateLimiter.When(k)
	l.mu.Lock()
	l.delays = append(l.delays, d)
	l.mu.Unlock()
	return d
}

func (l *recordingLimiter) recorded() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.delays)
}

// TestRetryWithBackoff: a reconcile that fails is retried after growing
// delays, then succeeds; success forgets the key, so its next failure
// starts the back-off over. Other keys are not held back meanwhile.
func TestRetryWithBackoff(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	leaks := controlplane.SnapshotGoroutines()
	ns := newNamespace(t, ctx)
	gvr, _ := installCRD(t, ctx)
	keys := createN(t, ctx, gvr, ns, 5)
	flaky := keys[0]

	var failuresLeft atomic.Int32
	failuresLeft.Store(3)
	j := newJournal()
	f := newFactory(t, cp.Config())
	limiter := &recordingLimiter{TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[controller.Key](100*time.Millisecond, 10*time.Second)}
	c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		j.record(req)
		if req.Key == flaky && failuresLeft.Add(-1) >= 0 {
			return errors.New("not yet")
		}
		return nil
	}), controller.Options{Workers: 2, RateLimiter: limiter})
	if err != nil {
		t.Fatal(err)
	}
	h := handle(t, f, gvr)
	defer h.Release()
	if err := c.Watch(h); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	stop := running(t, ctx, c)

	eventually(t, ctx, "the flaky key to succeed", func() bool { return j.count(flaky) == 4 })
	if bad := j.countsNot(keys[1:], 1); len(bad) > 0 {
		t.Errorf("other keys: %v", bad)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if got := limiter.recorded(); !slices.Equal(got, want) {
		t.Fatalf("back-off delays %v, want %v", got, want)
	}
	calls := j.of(flaky)
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].at.Sub(calls[i-1].at); gap < want[i-1]-5*time.Millisecond {
			t.Errorf("retry %d came %s after the failure, before its back-off of %s", i, gap, want[i-1])
		}
	}

	// Success forgot the key: one more failure waits the first delay again.
	failuresLeft.Store(1)
	r := cp.Dynamic().Resource(gvr).Namespace(ns)
	u, err := r.Get(ctx, flaky.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "changed", "spec", "value")
	if _, err := r.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the update to be retried and succeed", func() bool { return j.count(flaky) == 6 })
	want = append(want, 100*time.Millisecond)
	if got := limiter.recorded(); !slices.Equal(got, want) {
		t.Errorf("back-off delays %v, want %v (the success must reset the key's back-off)", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Failed != 4 || st.Requeued != 4 || st.Reconciled != int64(len(keys))+1 {
		t.Errorf("stats %+v, want Failed=4 Requeued=4 Reconciled=%d", st, len(keys)+1)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestRemovedResourceDropsKeysAndComesBack: keys queued when a CRD is
// deleted are not reconciled after its informer goes Removed, the
// reconciles running at that moment fail with 404 and are not retried, no
// request for its objects follows; a second CRD is unaffected. When the
// CRD is re-created, each new object is reconciled exactly once.
func TestRemovedResourceDropsKeysAndComesBack(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 6*time.Minute)
	leaks := controlplane.SnapshotGoroutines()
	ns := newNamespace(t, ctx)
	gvr, crdName := installCRD(t, ctx)
	other, _ := installCRD(t, ctx)
	const n = 20
	createN(t, ctx, gvr, ns, n)
	otherKeys := createN(t, ctx, other, ns, 5)

	cfg, requests := controlplane.CountRequests(cp.Config())
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, cfg)
	j := newJournal()
	gate := make(chan struct{})
	var blocked atomic.Int32
	var removedAt atomic.Pointer[time.Time]
	removed := make(chan schema.GroupVersionResource, 4)
	var afterRemoved atomic.Int32 // calls of gvr's keys that started after OnRemoved
	c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		j.record(req)
		if req.GVR != gvr {
			return nil
		}
		if removedAt.Load() != nil {
			afterRemoved.Add(1)
		}
		blocked.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		// What a real reconciler does: read the object from the server.
		// Once the CRD is gone this is a 404, which must not be retried.
		_, err := dyn.Resource(gvr).Namespace(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		return err
	}), controller.Options{Workers: 2, OnRemoved: func(g schema.GroupVersionResource) {
		now := time.Now()
		removedAt.Store(&now)
		removed <- g
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []schema.GroupVersionResource{gvr, other} {
		h := handle(t, f, g)
		defer h.Release()
		if err := c.Watch(h); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx)
	stop := running(t, ctx, c)

	// Both workers hold a key of gvr; the rest of its keys are queued.
	eventually(t, ctx, "two reconciles blocked", func() bool { return blocked.Load() == 2 })
	// The rest of gvr's keys wait in the queue (none has been reconciled:
	// both workers are blocked), with some of the other CRD's.
	eventually(t, ctx, "the other keys queued", func() bool { return c.Stats().Queued >= n-2 })
	if got := j.total(gvr); got != 2 {
		t.Fatalf("%d reconciles of gvr before the deletion, want the 2 blocked", got)
	}
	queued := n - 2

	if err := cp.DeleteCRD(ctx, crdName); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-removed:
		if g != gvr {
			t.Fatalf("OnRemoved(%s), want %s", g, gvr)
		}
	case <-ctx.Done():
		t.Fatal("OnRemoved was not called")
	}
	objectPath := "/apis/" + gvr.Group + "/" + gvr.Version + "/namespaces/" + ns + "/" + gvr.Resource + "/"
	getsBefore := requests.Count("list", objectPath)
	close(gate)
	time.Sleep(quiet)

	if got := j.total(gvr); got != 2 {
		t.Errorf("%d reconciles of the removed resource's keys, want only the 2 that were running", got)
	}
	if got := afterRemoved.Load(); got != 0 {
		t.Errorf("%d reconciles started after the resource was Removed", got)
	}
	if gets := requests.Count("list", objectPath) - getsBefore; gets > 2 {
		t.Errorf("%d GETs of the removed resource's objects after Removed, want at most the 2 running reconciles'", gets)
	}
	st := c.Stats()
	if st.Requeued != 0 {
		t.Errorf("%d keys requeued: a 404 of a removed resource must not be retried", st.Requeued)
	}
	if st.Dropped < int64(queued) || st.Removals != 1 {
		t.Errorf("stats %+v: want Dropped >= %d queued keys and Removals=1", st, queued)
	}
	if bad := j.countsNot(otherKeys, 1); len(bad) > 0 {
		t.Errorf("the other CRD's keys: %v", bad)
	}

	// Back: the same informer relists; each new object is queued once.
	crd := controlplane.NewCRD(gvr.Group, "Widget", "widgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	fresh := make([]controller.Key, 5)
	for i := range fresh {
		name := fmt.Sprintf("again-%d", i)
		if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, widget(gvr, ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fresh[i] = controller.Key{GVR: gvr, Namespace: ns, Name: name}
	}
	eventually(t, ctx, "the re-created objects reconciled", func() bool { return len(j.countsNot(fresh, 1)) == 0 })
	time.Sleep(quiet)
	if bad := j.countsNot(fresh, 1); len(bad) > 0 {
		t.Errorf("after the CRD came back, want one reconcile per object: %v", bad)
	}
	for _, k := range fresh {
		if c := j.of(k); len(c) > 0 && c[0].gone {
			t.Errorf("%s reconciled as gone", k)
		}
	}
	if got := j.total(gvr); got != 2+len(fresh) {
		t.Errorf("%d reconciles of the resource in all, want %d (old keys must not come back)", got, 2+len(fresh))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestShutdownDrains: a running reconcile finishes within the drain bound
// and Run returns nil; keys still queued are not reconciled. A reconcile
// that outlives the bound has its context cancelled and Run reports it.
// No goroutine is left either way.
func TestShutdownDrains(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ns := newNamespace(t, ctx)
	gvr, _ := installCRD(t, ctx)
	createN(t, ctx, gvr, ns, 10)

	for _, tc := range []struct {
		name      string
		work      time.Duration // how long a reconcile takes, ignoring ctx
		honourCtx bool
		bound     time.Duration
		wantErr   bool
	}{
		{name: "in time", work: 500 * time.Millisecond, bound: 10 * time.Second},
		{name: "past the bound", work: time.Hour, honourCtx: true, bound: 300 * time.Millisecond, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaks := controlplane.SnapshotGoroutines()
			f := newFactory(t, cp.Config())
			started := make(chan controller.Key, 10)
			var finished, cancelled, calls atomic.Int32
			c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
				calls.Add(1)
				started <- req.Key
				select {
				case <-time.After(tc.work):
					finished.Add(1)
				case <-ctx.Done():
					cancelled.Add(1)
					return ctx.Err()
				}
				return nil
			}), controller.Options{Workers: 1, DrainTimeout: tc.bound})
			if err != nil {
				t.Fatal(err)
			}
			h := handle(t, f, gvr)
			defer h.Release()
			if err := c.Watch(h); err != nil {
				t.Fatal(err)
			}
			f.Start(ctx)
			stop := running(t, ctx, c)
			var first controller.Key
			select {
			case first = <-started:
			case <-ctx.Done():
				t.Fatal("no reconcile started")
			}
			t0 := time.Now()
			err = stop()
			took := time.Since(t0)
			if tc.wantErr {
				var de *controller.DrainTimeoutError
				if !errors.As(err, &de) || len(de.InFlight) != 1 || de.InFlight[0] != first {
					t.Fatalf("Run: %v, want a *DrainTimeoutError naming %s", err, first)
				}
				eventually(t, ctx, "the reconcile to see its context cancelled", func() bool { return cancelled.Load() == 1 })
			} else {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if finished.Load() != 1 || cancelled.Load() != 0 {
					t.Errorf("the running reconcile did not finish normally (finished %d, cancelled %d)", finished.Load(), cancelled.Load())
				}
			}
			if took > tc.bound+2*time.Second {
				t.Errorf("Run took %s to return after its context ended (bound %s)", took, tc.bound)
			}
			if got := calls.Load(); got != 1 {
				t.Errorf("%d reconciles, want 1: keys still queued at shutdown must be dropped", got)
			}
			f.Shutdown()
			leaks.VerifyNoLeaks(t)
		})
	}
}

// TestSubscriptionFollowsCRDsInstalledLater: a controller subscribed to a
// category reconciles the objects of a CRD installed after it started,
// reading them from the cache, is told when the CRD is deleted, and
// reconciles each object once when it is installed again.
func TestSubscriptionFollowsCRDsInstalledLater(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	leaks := controlplane.SnapshotGoroutines()
	ns := newNamespace(t, ctx)
	category := unique("ctrlcat")
	first, _ := installCRD(t, ctx, controlplane.Categories(category))
	firstKeys := createN(t, ctx, first, ns, 4)

	f := newFactory(t, cp.Config())
	j := newJournal()
	removed := make(chan schema.GroupVersionResource, 4)
	c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		j.record(req)
		return nil
	}), controller.Options{Workers: 2, OnRemoved: func(g schema.GroupVersionResource) { removed <- g }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(discoveryresolver.Filter{Categories: []string{category}}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	stop := running(t, ctx, c)
	eventually(t, ctx, "the first CRD's objects", func() bool { return len(j.countsNot(firstKeys, 1)) == 0 })

	later, laterCRD := installCRD(t, ctx, controlplane.Categories(category))
	laterKeys := createN(t, ctx, later, ns, 6)
	eventually(t, ctx, "the later CRD's objects", func() bool { return len(j.countsNot(laterKeys, 1)) == 0 })
	time.Sleep(quiet)
	if bad := j.countsNot(append(firstKeys, laterKeys...), 1); len(bad) > 0 {
		t.Errorf("want one reconcile per object: %v", bad)
	}
	for _, k := range append(firstKeys, laterKeys...) {
		if calls := j.of(k); len(calls) > 0 && calls[0].gone {
			t.Errorf("%s: reconciled as gone, want the cached object", k)
		}
	}

	if err := cp.DeleteCRD(ctx, laterCRD); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-removed:
		if g != later {
			t.Errorf("OnRemoved(%s), want %s", g, later)
		}
	case <-ctx.Done():
		t.Fatal("OnRemoved not called for the deleted CRD")
	}

	// Back: the subscription picks the CRD up again; each new object is
	// reconciled once, with its cached object.
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(later.Group, "Widget", "widgets", controlplane.Categories(category))); err != nil {
		t.Fatal(err)
	}
	again := make([]controller.Key, 3)
	for i := range again {
		name := fmt.Sprintf("again-%d", i)
		if _, err := cp.Dynamic().Resource(later).Namespace(ns).Create(ctx, widget(later, ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		again[i] = controller.Key{GVR: later, Namespace: ns, Name: name}
	}
	eventually(t, ctx, "the re-created CRD's objects", func() bool { return len(j.countsNot(again, 1)) == 0 })
	time.Sleep(quiet)
	if bad := j.countsNot(again, 1); len(bad) > 0 {
		t.Errorf("after the CRD came back, want one reconcile per object: %v", bad)
	}
	for _, k := range again {
		if calls := j.of(k); len(calls) > 0 && calls[0].gone {
			t.Errorf("%s: reconciled as gone, want the cached object", k)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Failed != 0 || st.Removals != 1 {
		t.Errorf("stats %+v", st)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestPanicsRecovered: a panicking reconcile is retried and counted; a
// panicking filter skips its event and is counted; the controller goes on.
func TestPanicsRecovered(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	leaks := controlplane.SnapshotGoroutines()
	ns := newNamespace(t, ctx)
	gvr, _ := installCRD(t, ctx)
	keys := createN(t, ctx, gvr, ns, 4)

	f := newFactory(t, cp.Config())
	j := newJournal()
	var panicked atomic.Bool
	c, err := controller.New(f, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		j.record(req)
		if req.Name == "w-1" && panicked.CompareAndSwap(false, true) {
			panic("reconciler bug")
		}
		return nil
	}), controller.Options{Workers: 2, Filter: func(e subscription.Event) bool {
		if e.Object.(metav1.Object).GetName() == "w-3" {
			panic("filter bug")
		}
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := handle(t, f, gvr)
	defer h.Release()
	if err := c.Watch(h); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	stop := running(t, ctx, c)
	eventually(t, ctx, "the panicking key retried", func() bool { return j.count(keys[1]) == 2 })
	time.Sleep(quiet)
	if bad := j.countsNot([]controller.Key{keys[0], keys[2]}, 1); len(bad) > 0 {
		t.Errorf("%v", bad)
	}
	if n := j.count(keys[3]); n != 0 {
		t.Errorf("w-3's event was queued %d times although its filter panicked", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.ReconcilePanics != 1 || st.HandlerPanics != 1 || st.Failed != 1 || st.Requeued != 1 {
		t.Errorf("stats %+v, want one reconcile panic (retried) and one handler panic", st)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}
