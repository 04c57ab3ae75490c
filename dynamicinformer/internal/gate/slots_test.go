package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
)

// concurrency tracks how many requests are in flight and the peak.
type concurrency struct {
	now, peak atomic.Int32
}

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (c *concurrency) exit() { c.now.Add(-1) }

// server is a list/watch that takes a while to list and hands out fake
// watches.
type server struct {
	c       *concurrency
	latency time.Duration
	mu      sync.Mutex // guards watches
	watches []*watch.FakeWatcher
}

func (s *server) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	s.c.enter()
	defer s.c.exit()
	time.Sleep(s.latency)
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "List"}}
	l.SetResourceVersion("10")
	return l, nil
}

func (s *server) WatchWithContext(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(4, false)
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	return w, nil
}

func newLW(inner *server, slots *Slots) *ListerWatcher {
	return &ListerWatcher{
		Gate:   New(true),
		Server: &listwatch.Liveness{Inner: inner},
		Hooks: Hooks{ListStarted: func() {}, Listed: func(string) {}, NotFound: func(error) {},
			Emptied: func(string) {}, Waiting: func(string) {}},
		EmptyList:    func(string) runtime.Object { return &unstructured.UnstructuredList{} },
		Cached:       func() []interface{} { return nil },
		AsWatched:    func(interface{}) runtime.Object { return nil },
		Bookmark:     func(string) runtime.Object { return &unstructured.Unstructured{} },
		InitialLists: slots,
	}
}

// 200 informers start at once with a cap of 10: at most 10 first lists
// are in flight at any time, every one completes, and later lists are
// not bounded.
func TestInitialListsBounded(t *testing.T) {
	const informers, limit = 200, 10
	c := &concurrency{}
	inner := &server{c: c, latency: 5 * time.Millisecond}
	slots := NewSlots(limit)
	lws := make([]*ListerWatcher, informers)
	for i := range lws {
		lws[i] = newLW(inner, slots)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, lw := range lws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d first lists failed", failed.Load())
	}
	if p := c.peak.Load(); p > limit {
		t.Fatalf("peak of %d concurrent first lists, cap %d", p, limit)
	} else if p < limit/2 {
		t.Fatalf("peak of %d concurrent first lists with a cap of %d: the cap was not what limited them", p, limit)
	}
	t.Logf("first lists: peak %d concurrent, cap %d", c.peak.Load(), limit)

	// Relists (Serving) take no slot: all at once, even with every slot
	// taken.
	for i := 0; i < limit; i++ {
		if err := slots.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.peak.Store(0)
	for _, lw := range lws[:50] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || c.peak.Load() <= limit {
		t.Fatalf("relists: %d failed, peak %d; want none failed and more than %d at once (not bounded)", failed.Load(), c.peak.Load(), limit)
	}
	for i := 0; i < limit; i++ {
		slots.Release()
	}
}

// A first sync that streams (watch-list) holds its slot until the
// bookmark that ends its initial events has been delivered; with a cap
// of 1 a second informer's first list waits for it.
func TestWatchListHoldsSlotUntilInitialEventsEnd(t *testing.T) {
	c := &concurrency{}
	inner := &server{c: c}
	slots := NewSlots(1)
	streaming, other := newLW(inner, slots), newLW(inner, slots)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	yes := true
	w, err := streaming.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	listed := make(chan error, 1)
	go func() {
		_, err := other.ListWithContext(ctx, metav1.ListOptions{})
		listed <- err
	}()
	inner.mu.Lock()
	fw := inner.watches[0]
	inner.mu.Unlock()
	obj := &unstructured.Unstructured{}
	obj.SetName("a")
	fw.Add(obj)
	<-w.ResultChan()
	select {
	case err := <-listed:
		t.Fatalf("second first list ran (%v) while the first informer's initial events were streaming", err)
	case <-time.After(100 * time.Millisecond):
	}
	end := &unstructured.Unstructured{}
	end.SetResourceVersion("10")
	end.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	fw.Action(watch.Bookmark, end)
	<-w.ResultChan()
	select {
	case err := <-listed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot was not released when the initial events ended")
	}

	// A stream that ends before its initial events did gives its slot
	// back too.
	third, fourth := newLW(inner, slots), newLW(inner, slots)
	w3, err := third.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := fourth.ListWithContext(ctx, metav1.ListOptions{})
		listed <- err
	}()
	w3.Stop()
	select {
	case err := <-listed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot of a stream stopped before its initial events ended was not released")
	}
}
