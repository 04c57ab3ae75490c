package dynamicinformer

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// listCounter is a dynamic client whose lists take a while and are
// counted: in flight now, and the peak.
type listCounter struct {
	dynamic.Interface
	now, peak, total atomic.Int32
}

func (c *listCounter) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return countedResource{c.Interface.Resource(gvr), c}
}

// IsWatchListSemanticsUnSupported: the fake client below cannot stream
// lists.
func (c *listCounter) IsWatchListSemanticsUnSupported() bool { return true }

type countedResource struct {
	dynamic.NamespaceableResourceInterface
	c *listCounter
}

func (r countedResource) Namespace(ns string) dynamic.ResourceInterface {
	return countedNamespace{r.NamespaceableResourceInterface.Namespace(ns), r.c}
}

type countedNamespace struct {
	dynamic.ResourceInterface
	c *listCounter
}

func (n countedNamespace) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c := n.c
	c.total.Add(1)
	now := c.now.Add(1)
	defer c.now.Add(-1)
	for p := c.peak.Load(); now > p && !c.peak.CompareAndSwap(p, now); p = c.peak.Load() {
	}
	time.Sleep(10 * time.Millisecond)
	return n.ResourceInterface.List(ctx, opts)
}

// Many informers started at once send at most Options.MaxConcurrentInitialLists
// first lists at a time, and all sync; without a bound they all list at
// once.
func TestMaxConcurrentInitialLists(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		informers int
		maxPeak   int32
		minPeak   int32
	}{
		{"cap 5", Options{MaxConcurrentInitialLists: 5}, 60, 5, 5},
		{"no cap", Options{MaxConcurrentInitialLists: -1}, 20, 20, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			client := &listCounter{Interface: fakeClient(widget("a", "w1", nil))}
			opts := c.opts
			opts.DisableCRDTracking = true
			f := NewSharedInformerFactory(client, opts)
			for i := 0; i < c.informers; i++ {
				f.ForResource(widgets, WithSharingKey(fmt.Sprint(i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f.Start(ctx)
			synced := f.WaitForCacheSync(ctx)
			if !synced[widgets] {
				t.Fatal("not every informer synced")
			}
			peak := client.peak.Load()
			t.Logf("%d informers: %d lists, peak %d at once", c.informers, client.total.Load(), peak)
			if peak > c.maxPeak || peak < c.minPeak {
				t.Errorf("peak of %d concurrent first lists, want %d to %d", peak, c.minPeak, c.maxPeak)
			}
			f.Shutdown()
			checkNoLeaks(t, before)
		})
	}
}

func TestDefaultMaxConcurrentInitialLists(t *testing.T) {
	if got := defaults(Options{}).maxInitial; got != defaultMaxConcurrentInitialLists {
		t.Fatalf("default cap %d, want defaultMaxConcurrentInitialLists (%d)", got, defaultMaxConcurrentInitialLists)
	}
	if f := NewSharedInformerFactory(fakeClient(), Options{}); f.initialLists.Cap() != 50 {
		t.Fatal("a factory without the option is not bounded at 50 first lists")
	}
}

// blockingLists is a dynamic client whose lists wait until release is
// closed.
type blockingLists struct {
	dynamic.Interface
	release chan struct{}
}

func (c *blockingLists) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return blockingResource{c.Interface.Resource(gvr), c}
}

func (c *blockingLists) IsWatchListSemanticsUnSupported() bool { return true }

type blockingResource struct {
	dynamic.NamespaceableResourceInterface
	c *blockingLists
}

func (r blockingResource) Namespace(ns string) dynamic.ResourceInterface {
	return blockingNamespace{r.NamespaceableResourceInterface.Namespace(ns), r.c}
}

type blockingNamespace struct {
	dynamic.ResourceInterface
	c *blockingLists
}

func (n blockingNamespace) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	select {
	case <-n.c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.ResourceInterface.List(ctx, opts)
}

// An informer whose first list waits for an initial-list slot says so in
// its status (Pending, WaitingForSlotReason, no error); it syncs once the
// slot is free.
func TestWaitingForInitialListSlotStatus(t *testing.T) {
	client := &blockingLists{Interface: fakeClient(widget("a", "w1", nil)), release: make(chan struct{})}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, MaxConcurrentInitialLists: 1})
	h1 := f.ForResource(widgets, WithSharingKey("1"))
	h2 := f.ForResource(widgets, WithSharingKey("2"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	var waiting, listing Status
	waitFor(t, func() bool {
		s1, s2 := h1.Status(), h2.Status()
		if s1.Reason == "waiting for an initial-list slot" {
			waiting, listing = s1, s2
		} else {
			waiting, listing = s2, s1
		}
		return waiting.Reason == "waiting for an initial-list slot" && listing.State == Syncing
	})
	if waiting.State != Pending || waiting.Err != nil {
		t.Fatalf("waiting informer: %+v, want Pending with no error", waiting)
	}
	close(client.release)
	waitFor(t, func() bool { return h1.Status().State == Synced && h2.Status().State == Synced })
	f.Shutdown()
}
