package subscription

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

func name(e Event) string { return e.Object.(metav1.Object).GetName() }

// panicMetrics counts HandlerPanic calls; every other observation is
// dropped.
type panicMetrics struct{ panics atomic.Int64 }

func (m *panicMetrics) NewInformer(metrics.Identity) metrics.Informer {
	return informerMetrics{m}
}

type informerMetrics struct{ m *panicMetrics }

func (informerMetrics) State(string)                    {}
func (informerMetrics) Synced()                         {}
func (informerMetrics) Event(string, int)               {}
func (informerMetrics) Request(string, string)          {}
func (informerMetrics) WatchRestart()                   {}
func (i informerMetrics) HandlerPanic()                 { i.m.panics.Add(1) }
func (informerMetrics) QueuedItems(int)                 {}
func (informerMetrics) ProcessingLatency(time.Duration) {}
func (informerMetrics) StoreResourceVersion(float64)    {}
func (informerMetrics) OutsideShard(int)                {}

var _ metrics.Informer = informerMetrics{}

// A subscription asks discovery nothing of its own: with rediscovery off,
// the rounds stay those of the start. It delivers initial objects as
// Added with IsInitialList; a handler panic on an informer's event is
// recovered by the factory and counted in that informer's Status and
// metrics; when a resource leaves discovery the handler gets one Deleted
// per object it saw.
func TestSubscriptionAddsNoDiscoveryRounds(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(served([]string{"widgets"}))
	c := fakeClient(object(widgets, "a", "w1"), object(widgets, "a", "boom"))
	metrics := &panicMetrics{}
	f := dynamicinformer.NewSharedInformerFactory(c, dynamicinformer.Options{Resolver: discoveryresolver.New(d), RediscoveryInterval: -1, DisableCRDTracking: true, Metrics: metrics})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	var log eventLog
	sub, err := New(ctx, f, discoveryresolver.Filter{Groups: []string{"example.com"}}, func(e Event) {
		if e.Type == Added && name(e) == "boom" {
			panic("handler bug")
		}
		log.add(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the subscription synced", 10*time.Second, func() bool { return sub.HasSynced() && len(sub.Resources()) == 1 })
	if r := sub.Resources(); r[0] != widgets {
		t.Fatalf("resources %v", r)
	}
	waitUntil(t, "the initial event", 10*time.Second, func() bool { return len(log.get()) == 1 })
	if e := log.get()[0]; e.Type != Added || !e.IsInitialList || e.GVR != widgets || name(e) != "w1" {
		t.Fatalf("event %+v", e)
	}
	sts := f.Statuses()
	if len(sts) != 1 || sts[0].GVR != widgets || sts[0].HandlerPanics != 1 || sts[0].LastHandlerPanic == nil ||
		!strings.Contains(sts[0].LastHandlerPanic.Error(), "handler bug") {
		t.Fatalf("statuses %+v, want the widgets informer with the one panic", sts)
	}
	if n := metrics.panics.Load(); n != 1 {
		t.Fatalf("metrics saw %d handler panics, want 1", n)
	}
	time.Sleep(200 * time.Millisecond)
	start := d.rounds()
	time.Sleep(2 * time.Second)
	if n := d.rounds(); n != start || start > 2 {
		t.Fatalf("discovery rounds: %d at start, %d two seconds later; want no more than the start's", start, n)
	}

	// The resource leaves discovery (a round caused by a 404's re-check, say).
	d.setResources(served([]string{"gadgets"}))
	if err := f.Resolver().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "widgets dropped", 10*time.Second, func() bool { return slices.Equal(sub.Resources(), []schema.GroupVersionResource{gadgets}) })
	// One Deleted per object the handler was given (the panicking one
	// too): from the removal (the resource left discovery, so it is not
	// served) or from the subscription dropping it, whichever came first.
	deleted := func() []string {
		var out []string
		for _, e := range log.get() {
			if e.Type == Deleted && e.GVR == widgets {
				out = append(out, name(e))
			}
		}
		slices.Sort(out)
		return out
	}
	waitUntil(t, "the deletes", 10*time.Second, func() bool { return len(deleted()) >= 2 })
	time.Sleep(200 * time.Millisecond)
	if got := deleted(); !slices.Equal(got, []string{"boom", "w1"}) {
		t.Fatalf("deletes %v, want one per object", got)
	}
	sub.Stop()
	sub.Stop()
	f.Shutdown()
	noLeaks(t)
}

// A late subscriber shares the informer another handle made and gets its
// cached objects as Added with IsInitialList, then live events.
func TestLateSubscriberGetsInitialList(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(served([]string{"widgets"}))
	c := fakeClient(object(widgets, "a", "w1"), object(widgets, "b", "w2"))
	f := dynamicinformer.NewSharedInformerFactory(c, dynamicinformer.Options{Resolver: discoveryresolver.New(d), DisableCRDTracking: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	waitUntil(t, "the watch", 10*time.Second, func() bool { return watching(c, widgets) })

	var log eventLog
	sub, err := New(ctx, f, discoveryresolver.Filter{Categories: []string{"things"}}, log.add)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the initial objects", 10*time.Second, func() bool { return sub.HasSynced() && len(log.get()) == 2 })
	var got []string
	for _, e := range log.get() {
		if e.Type != Added || !e.IsInitialList || e.GVR != widgets {
			t.Fatalf("initial event %+v", e)
		}
		got = append(got, name(e))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"w1", "w2"}) {
		t.Fatalf("initial objects %v", got)
	}
	if n := len(f.Statuses()); n != 1 {
		t.Fatalf("%d informers, want the one shared by the handle and the subscription", n)
	}
	if _, err := c.Resource(widgets).Namespace("a").Create(ctx, object(widgets, "a", "w3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the live add", 10*time.Second, func() bool { return len(log.get()) == 3 })
	if e := log.get()[2]; e.Type != Added || e.IsInitialList || name(e) != "w3" {
		t.Fatalf("live event %+v", e)
	}
	sub.Stop()
	// The subscription's release leaves the other handle's informer running.
	if st := h.Status(); st.State != dynamicinformer.Synced {
		t.Fatalf("the handle's informer after Stop: %+v", st)
	}
	h.Release()
	f.Shutdown()
	noLeaks(t)
}

// A resource that stops matching while it is still served: the
// subscription lets it go and sends a Deleted (FinalStateUnknown) for
// every object it last saw; a panic in one of those is recovered and
// logged with the context's logger, and the others are still delivered.
func TestStopsMatchingDeletesWhatWasSeen(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(served([]string{"widgets", "gadgets"}))
	c := fakeClient(object(widgets, "a", "w1"), object(widgets, "a", "boom"), object(gadgets, "a", "g1"))
	f := dynamicinformer.NewSharedInformerFactory(c, dynamicinformer.Options{Resolver: discoveryresolver.New(d), RediscoveryInterval: -1, DisableCRDTracking: true})
	var logMu sync.Mutex
	var logged []string
	logger := funcr.New(func(prefix, args string) {
		logMu.Lock()
		logged = append(logged, args)
		logMu.Unlock()
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	defer cancel()
	f.Start(ctx)
	var log eventLog
	sub, err := New(ctx, f, discoveryresolver.Filter{Categories: []string{"things"}}, func(e Event) {
		if e.Type == Deleted && name(e) == "boom" {
			panic("delete bug")
		}
		log.add(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "synced", 10*time.Second, func() bool { return sub.HasSynced() && len(log.get()) == 3 })

	// Widgets leave the category. The resolver reports rounds that change
	// the set of served resources, so another (not matching) resource
	// comes with it.
	d.setResources(served([]string{"widgets", "gadgets", "sprockets"}, "widgets", "sprockets"))
	if err := f.Resolver().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "widgets dropped", 10*time.Second, func() bool { return slices.Equal(sub.Resources(), []schema.GroupVersionResource{gadgets}) })
	var deletes []Event
	for _, e := range log.get() {
		if e.Type == Deleted {
			deletes = append(deletes, e)
		}
	}
	if len(deletes) != 1 || deletes[0].GVR != widgets || name(deletes[0]) != "w1" || !deletes[0].FinalStateUnknown {
		t.Fatalf("deletes %+v, want w1's, FinalStateUnknown (boom's panicked)", deletes)
	}
	logMu.Lock()
	n := 0
	for _, l := range logged {
		if strings.Contains(l, "delete bug") && strings.Contains(l, "widgets") {
			n++
		}
	}
	logMu.Unlock()
	if n != 1 {
		t.Fatalf("logged %v, want the panic once", logged)
	}
	// Still served: gadgets' events go on.
	if _, err := c.Resource(gadgets).Namespace("a").Create(ctx, object(gadgets, "a", "g2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a later event", 10*time.Second, func() bool {
		evs := log.get()
		e := evs[len(evs)-1]
		return e.GVR == gadgets && name(e) == "g2"
	})
	sub.Stop()
	f.Shutdown()
	noLeaks(t)
}

// The handler is never called concurrently, although two informers
// deliver at once.
func TestHandlerCallsAreSerialized(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(served([]string{"widgets", "gadgets"}))
	c := fakeClient()
	f := dynamicinformer.NewSharedInformerFactory(c, dynamicinformer.Options{Resolver: discoveryresolver.New(d), DisableCRDTracking: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	var inCall, overlaps, calls atomic.Int64
	sub, err := New(ctx, f, discoveryresolver.Filter{Groups: []string{"example.com"}}, func(e Event) {
		if inCall.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		inCall.Add(-1)
		calls.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both watches", 10*time.Second, func() bool { return watching(c, widgets) && watching(c, gadgets) })
	const n = 30
	var wg sync.WaitGroup
	for _, gvr := range []schema.GroupVersionResource{widgets, gadgets} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				_, _ = c.Resource(gvr).Namespace("a").Create(ctx, object(gvr, "a", "o"+strings.Repeat("x", i)), metav1.CreateOptions{})
			}
		}()
	}
	wg.Wait()
	waitUntil(t, "every event", 10*time.Second, func() bool { return calls.Load() == 2*n })
	if o := overlaps.Load(); o != 0 {
		t.Fatalf("%d handler calls overlapped another", o)
	}
	sub.Stop()
	f.Shutdown()
	noLeaks(t)
}

// After Shutdown the subscription's goroutine ends by itself and Stop
// returns; New is ErrStopped; a reconcile that meets the shut-down
// factory's stopped handles adds nothing and says nothing.
func TestShutdownEndsSubscription(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	d := newLockedDiscovery(served([]string{"widgets"}))
	f := dynamicinformer.NewSharedInformerFactory(fakeClient(object(widgets, "a", "w1")), dynamicinformer.Options{Resolver: discoveryresolver.New(d), DisableCRDTracking: true})
	ctx := context.Background()
	f.Start(ctx)
	var log eventLog
	sub, err := New(ctx, f, discoveryresolver.Filter{}, log.add)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "synced", 10*time.Second, func() bool { return sub.HasSynced() && len(log.get()) == 1 })
	f.Shutdown()
	select {
	case <-sub.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription's goroutine still runs 5 s after Shutdown")
	}
	if r := sub.Resources(); len(r) != 0 {
		t.Fatalf("resources after Shutdown %v", r)
	}
	if err := sub.reconcile(ctx); err != nil || len(sub.Resources()) != 0 {
		t.Fatalf("reconcile after Shutdown: %v, resources %v", err, sub.Resources())
	}
	sub.Stop()
	sub.Stop()
	if _, err := New(ctx, f, discoveryresolver.Filter{}, log.add); !errors.Is(err, dynamicinformer.ErrStopped) {
		t.Fatalf("New after Shutdown: %v", err)
	}
	noLeaks(t)
}

func TestNewErrors(t *testing.T) {
	ctx := context.Background()
	d := newLockedDiscovery(served([]string{"widgets"}))
	f := dynamicinformer.NewSharedInformerFactory(fakeClient(), dynamicinformer.Options{Resolver: discoveryresolver.New(d), DisableCRDTracking: true})
	defer f.Shutdown()
	if _, err := New(ctx, nil, discoveryresolver.Filter{}, func(Event) {}); !errors.Is(err, dynamicinformer.ErrInvalid) {
		t.Errorf("nil factory: %v", err)
	}
	if _, err := New(ctx, f, discoveryresolver.Filter{}, nil); !errors.Is(err, dynamicinformer.ErrInvalid) {
		t.Errorf("nil handler: %v", err)
	}
	noResolver := dynamicinformer.NewSharedInformerFactory(fakeClient(), dynamicinformer.Options{DisableCRDTracking: true})
	defer noResolver.Shutdown()
	if _, err := New(ctx, noResolver, discoveryresolver.Filter{}, func(Event) {}); !errors.Is(err, dynamicinformer.ErrInvalid) {
		t.Errorf("no resolver: %v", err)
	}
	// Options no informer can run with: nothing to watch, no member that
	// would never sync.
	sub, err := New(ctx, f, discoveryresolver.Filter{}, func(Event) { t.Error("an event") }, dynamicinformer.WithLabelSelector("a in ("))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	if r := sub.Resources(); len(r) != 0 || !sub.HasSynced() {
		t.Fatalf("invalid options: resources %v, synced %v", r, sub.HasSynced())
	}
}

// TestObjectKeyIsStoreKey: the keys a Subscription records and reports in
// a PanicError are the store's (MetaNamespaceKeyFunc) keys, "name" alone
// for cluster-scoped objects.
func TestObjectKeyIsStoreKey(t *testing.T) {
	cluster := object(widgets, "", "c")
	for _, obj := range []any{object(widgets, "a", "w"), cluster} {
		want, err := toolscache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got := objectKey(obj); got != want {
			t.Errorf("objectKey = %q, want the store's key %q", got, want)
		}
	}
	if got := objectKey(42); got != "" {
		t.Errorf("objectKey of a non-object = %q", got)
	}
}
