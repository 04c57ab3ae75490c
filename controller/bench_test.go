package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/dynamicinformer"
)

var benchGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func benchClient(n int) *dynamicfake.FakeDynamicClient {
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{
				"name": fmt.Sprintf("w-%d", i), "namespace": fmt.Sprintf("ns-%d", i%10),
				"labels": map[string]any{"app": fmt.Sprintf("app-%d", i%100)},
			},
		}}
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{benchGVR: "WidgetList"}, objs...)
}

// counter is the no-op reconcile both sides run: it counts calls, notes
// the first and the last, and signals when all n keys are done.
type counter struct {
	n      int64
	calls  atomic.Int64
	first  atomic.Int64 // UnixNano of the first call
	last   atomic.Int64 // UnixNano of the n-th call
	done   chan struct{}
	closed sync.Once
}

func newCounter(n int) *counter { return &counter{n: int64(n), done: make(chan struct{})} }

func (c *counter) reconcile(obj any) {
	if obj == nil {
		panic("object not in cache")
	}
	switch c.calls.Add(1) {
	case 1:
		c.first.Store(time.Now().UnixNano())
		if c.n == 1 {
			c.last.Store(c.first.Load())
			c.closed.Do(func() { close(c.done) })
		}
	case c.n:
		c.last.Store(time.Now().UnixNano())
		c.closed.Do(func() { close(c.done) })
	}
}

// reconcileNamed is reconcile for the hand-written side, which gets the
// namespace and name as the controller's Request carries them.
func (c *counter) reconcileNamed(_, name string, obj any) {
	if name == "" {
		panic("no name")
	}
	c.reconcile(obj)
}

// span is the time from the first to the last reconcile: the workers'
// throughput, without the handler registration and the wait for sync.
func (c *counter) span() time.Duration { return time.Duration(c.last.Load() - c.first.Load()) }

// BenchmarkReconcile measures keys reconciled per second with a no-op
// reconciler over 10k cached objects and 1, 4 and 16 workers:
// informerkit's controller (Watch on a factory handle) and, in the same
// iteration, the same plumbing written by hand with client-go (its
// dynamicinformer, a typed rate-limiting workqueue of "namespace/name"
// strings, workers that read the indexer). Each side registers a new
// handler on an informer that has synced already (its 10k objects are
// replayed as adds), waits for the handler to sync, runs its workers until
// every key is reconciled and shuts down. Offline: both informers read
// the same kind of fake dynamic client.
//
// Reported: ik-keys/s and cg-keys/s, the median over the iterations of n
// divided by the time from the first to the last reconcile (the workers'
// throughput); ik-ms and cg-ms, the median of a whole side (handler
// registration, sync, the run, shutdown); cost-x, cg-keys/s over
// ik-keys/s (1.0: the same cost per key; above 1: the controller costs
// more); bare-keys/s and bare-cost-x, the same for a hand-written loop
// that hands its reconciler only the key string and the object (no
// namespace and name). Running every side in each iteration exposes them
// to the same machine load.
func BenchmarkReconcile(b *testing.B) {
	const n = 10000
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("n=%d/workers=%d", n, workers), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := dynamicinformer.NewSharedInformerFactory(benchClient(n), dynamicinformer.Options{DisableCRDTracking: true})
			defer f.Shutdown()
			h := f.ForResource(benchGVR)
			defer h.Release()
			f.Start(ctx)
			if !f.WaitForCacheSync(ctx)[benchGVR] {
				b.Fatal("not synced")
			}
			stopCh := make(chan struct{})
			cgf := cgdynamicinformer.NewDynamicSharedInformerFactory(benchClient(n), 0)
			inf := cgf.ForResource(benchGVR).Informer()
			cgf.Start(stopCh)
			defer func() { close(stopCh); cgf.Shutdown() }()
			if !toolscache.WaitForCacheSync(stopCh, inf.HasSynced) {
				b.Fatal("not synced")
			}

			var ikRate, cgRate, bareRate, ikWall, cgWall []float64
			b.ResetTimer()
			for i := range b.N {
				ikSide := func() {
					t0 := time.Now()
					cnt := newCounter(n)
					c, err := controller.New(f, controller.ReconcilerFunc(func(_ context.Context, req controller.Request) error {
						cnt.reconcile(req.Object)
						return nil
					}), controller.Options{Workers: workers})
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Watch(h); err != nil {
						b.Fatal(err)
					}
					runCtx, stop := context.WithCancel(ctx)
					ran := make(chan error, 1)
					go func() { ran <- c.Run(runCtx) }()
					<-cnt.done
					stop()
					if err := <-ran; err != nil {
						b.Fatal(err)
					}
					if got := cnt.calls.Load(); got != n {
						b.Fatalf("%d reconciles, want %d", got, n)
					}
					ikWall = append(ikWall, float64(time.Since(t0).Milliseconds()))
					ikRate = append(ikRate, float64(n)/cnt.span().Seconds())
				}
				cgSide := func() {
					t0 := time.Now()
					cnt := newCounter(n)
					if err := handWritten(ctx, inf, inf.GetIndexer(), workers, cnt, true); err != nil {
						b.Fatal(err)
					}
					if got := cnt.calls.Load(); got != n {
						b.Fatalf("%d reconciles, want %d", got, n)
					}
					cgWall = append(cgWall, float64(time.Since(t0).Milliseconds()))
					cgRate = append(cgRate, float64(n)/cnt.span().Seconds())
				}
				bareSide := func() {
					cnt := newCounter(n)
					if err := handWritten(ctx, inf, inf.GetIndexer(), workers, cnt, false); err != nil {
						b.Fatal(err)
					}
					if got := cnt.calls.Load(); got != n {
						b.Fatalf("%d reconciles, want %d", got, n)
					}
					bareRate = append(bareRate, float64(n)/cnt.span().Seconds())
				}
				// Rotate which side goes first, so that none always pays
				// another's garbage.
				sides := []func(){ikSide, cgSide, bareSide}
				for j := range sides {
					sides[(i+j)%len(sides)]()
				}
			}
			b.StopTimer()
			ik, cg := median(ikRate), median(cgRate)
			b.ReportMetric(ik, "ik-keys/s")
			b.ReportMetric(cg, "cg-keys/s")
			b.ReportMetric(cg/ik, "cost-x")
			bare := median(bareRate)
			b.ReportMetric(bare, "bare-keys/s")
			b.ReportMetric(bare/ik, "bare-cost-x")
			b.ReportMetric(median(ikWall), "ik-ms")
			b.ReportMetric(median(cgWall), "cg-ms")
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// handWritten is the client-go controller loop as its sample-controller
// writes it: handler → queue of MetaNamespaceKeyFunc keys → workers that
// split the key, read the indexer and forget on success (a failure would
// be requeued rate-limited; the no-op reconcile never fails).
//
// split=false is the barest loop: the reconciler gets the key string and
// the object, and must split the key itself if it needs the name.
func handWritten(ctx context.Context, inf toolscache.SharedIndexInformer, indexer toolscache.Indexer, workers int, cnt *counter, split bool) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{})
	enqueue := func(obj any) {
		if key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	// The same wait for sync as the controller's (ticks of 10 ms).
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return reg.HasSynced(), nil
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				func() {
					defer q.Done(key)
					// What the controller hands its reconciler: the
					// namespace, the name and the cached object.
					obj, exists, err := indexer.GetByKey(key)
					if err != nil || !exists {
						obj = nil
					}
					if !split {
						cnt.reconcileNamed("", key, obj)
						q.Forget(key)
						return
					}
					ns, name, err := toolscache.SplitMetaNamespaceKey(key)
					if err != nil {
						q.Forget(key)
						return
					}
					cnt.reconcileNamed(ns, name, obj)
					q.Forget(key)
				}()
			}
		}()
	}
	<-cnt.done
	q.ShutDown()
	wg.Wait()
	return nil
}
