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

// Many informers started at once send at most WithMaxConcurrentInitialLists
// first lists at a time, and all sync; without a bound they all list at
// once.
func TestMaxConcurrentInitialLists(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      []Option
		informers int
		maxPeak   int32
		minPeak   int32
	}{
		{"cap 5", []Option{WithMaxConcurrentInitialLists(5)}, 60, 5, 5},
		{"no cap", []Option{WithMaxConcurrentInitialLists(0)}, 20, 20, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			client := &listCounter{Interface: fakeClient(widget("a", "w1", nil))}
			f := NewSharedInformerFactory(client, 0, append([]Option{WithoutCRDTracking()}, c.opts...)...)
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
	if got := defaults(0).maxInitial; got != DefaultMaxConcurrentInitialLists {
		t.Fatalf("default cap %d, want DefaultMaxConcurrentInitialLists (%d)", got, DefaultMaxConcurrentInitialLists)
	}
	if f := NewSharedInformerFactory(fakeClient(), 0); f.initialLists.Cap() != 50 {
		t.Fatal("a factory without the option is not bounded at 50 first lists")
	}
}
