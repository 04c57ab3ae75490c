package crcachetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/controllerruntime"
)

// TestCRReadCostIndependentOfSize: a cached Get (and a label-selector
// List) costs the same however many objects the informer holds. Reads
// ask the informer's state, and InformerHandle.Status counts the store's
// keys (a slice of every key, O(n)): asked on every read, a Get of one
// object at N=10,000 took 1 ms and allocated 160 KB. Measured here as
// bytes allocated per read, with deep copies off (so a read itself
// allocates next to nothing); before the cache kept the state between
// status changes, each read here allocated over 24 KB.
func TestCRReadCostIndependentOfSize(t *testing.T) {
	// Not parallel: it reads the process's allocation total (runtime.MemStats),
	// which other tests' work would add to.
	ctx := ctxT(t, 4*time.Minute)
	crd := newWidgetCRD()
	crd.install(t, ctx)
	ns := newNamespace(t, ctx)
	const n = 1500
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += len(errs) {
				l := map[string]string{"app": fmt.Sprintf("app-%d", i%100)}
				name := fmt.Sprintf("w-%d", i)
				if _, err := cp.Dynamic().Resource(crd.gvr).Namespace(ns).Create(ctx, crd.widget(ns, name, l), metav1.CreateOptions{}); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	yes := true
	c, err := controllerruntime.NewCache(cp.Config(), crcache.Options{Scheme: crd.scheme, DefaultUnsafeDisableDeepCopy: &yes})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(runCtx) }()
	defer func() { stop(); <-done }()
	for _, obj := range []client.Object{crd.u(), &Widget{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	reads := map[string]func() error{
		"unstructured Get": func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w-7"}, crd.u()) },
		"typed Get":        func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w-7"}, &Widget{}) },
		"List app=app-7": func() error {
			l := crd.ulist()
			if err := c.List(ctx, l, client.MatchingLabels{"app": "app-7"}); err != nil {
				return err
			}
			if len(l.Items) != n/100 {
				return fmt.Errorf("%d objects, want %d", len(l.Items), n/100)
			}
			return nil
		},
	}
	for what, read := range reads {
		if err := read(); err != nil { // first reads build what they keep (label index)
			t.Fatalf("%s: %v", what, err)
		}
		const iters = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range iters {
			if err := read(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		runtime.ReadMemStats(&after)
		perRead := (after.TotalAlloc - before.TotalAlloc) / iters
		t.Logf("%s: %d B allocated per read with %d objects cached", what, perRead, n)
		if perRead > 8<<10 {
			t.Errorf("%s allocates %d B per read with %d objects cached: the read scales with the cache", what, perRead, n)
		}
	}
}
