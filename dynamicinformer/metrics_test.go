package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

// recorder is a metrics.Exporter that keeps everything it is told.
type recorder struct {
	mu        sync.Mutex // guards everything below
	informers []*informerRecord
}

func (r *recorder) NewInformer(id metrics.Identity) metrics.Informer {
	r.mu.Lock()
	defer r.mu.Unlock()
	ir := &informerRecord{r: r, id: id, requests: map[string]int{}, events: map[string]int{}}
	r.informers = append(r.informers, ir)
	return ir
}

// lastCounts derives the factory's informer counts as package metrics
// says an exporter does: wanted, the informers not yet Stopped; running,
// those of them Syncing, Synced or Stale.
func (r *recorder) lastCounts() [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c [2]int
	for _, ir := range r.informers {
		if ir.stopped {
			continue
		}
		c[0]++
		if n := len(ir.states); n > 0 && (ir.states[n-1] == Syncing || ir.states[n-1] == Synced || ir.states[n-1] == Stale) {
			c[1]++
		}
	}
	return c
}

func (r *recorder) all() []*informerRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.informers)
}

// informerRecord is one metrics.Informer; its fields are guarded by r.mu.
type informerRecord struct {
	r                    *recorder
	id                   metrics.Identity
	states               []State // without the last, Stopped
	synced               int
	events               map[string]int
	objects              int
	requests             map[string]int // "verb reason"
	restarts             int
	panics               int
	queued, latencies    int
	storeRV              float64
	stopped              bool
	callsAfterStop       int
	repeatedState        int
	maxQueued            int
	processingLatencySum time.Duration
	outsideShard         int
}

func (ir *informerRecord) do(f func()) {
	ir.r.mu.Lock()
	defer ir.r.mu.Unlock()
	if ir.stopped {
		ir.callsAfterStop++
		return
	}
	f()
}

func (ir *informerRecord) State(s string) {
	ir.do(func() {
		if n := len(ir.states); n > 0 && string(ir.states[n-1]) == s {
			ir.repeatedState++
		}
		if s == "Stopped" {
			ir.stopped = true
			return
		}
		ir.states = append(ir.states, State(s))
	})
}
func (ir *informerRecord) Synced()             { ir.do(func() { ir.synced++ }) }
func (ir *informerRecord) WatchRestart()       { ir.do(func() { ir.restarts++ }) }
func (ir *informerRecord) HandlerPanic()       { ir.do(func() { ir.panics++ }) }
func (ir *informerRecord) Request(v, r string) { ir.do(func() { ir.requests[v+" "+r]++ }) }
func (ir *informerRecord) Event(t string, objects int) {
	ir.do(func() { ir.events[t]++; ir.objects = objects })
}
func (ir *informerRecord) QueuedItems(n int) {
	ir.do(func() { ir.queued++; ir.maxQueued = max(ir.maxQueued, n) })
}
func (ir *informerRecord) ProcessingLatency(d time.Duration) {
	ir.do(func() { ir.latencies++; ir.processingLatencySum += d })
}
func (ir *informerRecord) StoreResourceVersion(rv float64) { ir.do(func() { ir.storeRV = rv }) }
func (ir *informerRecord) OutsideShard(n int)              { ir.do(func() { ir.outsideShard += n }) }

// read runs f on the record under the recorder's lock.
func (ir *informerRecord) read(f func(ir *informerRecord) bool) bool {
	ir.r.mu.Lock()
	defer ir.r.mu.Unlock()
	return f(ir)
}

func rvWidget(ns, name, rv string) *unstructured.Unstructured {
	w := widget(ns, name, nil)
	w.SetResourceVersion(rv)
	return w
}

// One informer's life as its metrics see it: states in order, initial
// list and later events with the cache's object count, requests, a
// handler panic, client-go's FIFO and store metrics, wanted/running
// counts, nothing after Stopped; a recreated informer of the same
// resource reports again (client-go's name is not reused).
func TestMetricsFollowAnInformer(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(rvWidget("a", "w1", "10"), rvWidget("a", "w2", "11"))
	rec := &recorder{}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Metrics: rec})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets, WithNamespaces("a"))
	if got := rec.lastCounts(); got != [2]int{1, 0} {
		t.Fatalf("after ForResource: wanted/running %v, want [1 0]", got)
	}
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ interface{}) { panic("boom") },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	res := client.Resource(widgets).Namespace("a")
	if _, err := res.Create(ctx, rvWidget("a", "w3", "12"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, "w2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w1 := rvWidget("a", "w1", "13")
	w1.SetLabels(map[string]string{"x": "y"})
	if _, err := res.Update(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	recs := rec.all()
	if len(recs) != 1 {
		t.Fatalf("%d informers reported, want 1", len(recs))
	}
	ir := recs[0]
	if ir.id.GVR != widgets || !slices.Equal(ir.id.Namespaces, []string{"a"}) || ir.id.LabelSelector != "" || ir.id.MetadataOnly {
		t.Fatalf("NewInformer got %+v, want widgets in namespace a", ir.id)
	}
	waitFor(t, func() bool {
		return ir.read(func(ir *informerRecord) bool { return ir.events["UPDATED"] == 1 && ir.panics == 1 })
	})
	waitFor(t, func() bool { return rec.lastCounts() == [2]int{1, 1} })
	ir.read(func(ir *informerRecord) bool {
		if want := []State{Pending, Syncing, Synced}; !slices.Equal(ir.states, want) {
			t.Errorf("states %v, want %v", ir.states, want)
		}
		if ir.synced != 1 {
			t.Errorf("Synced reported %d times, want 1", ir.synced)
		}
		if ir.events["ADDED"] != 3 || ir.events["UPDATED"] != 1 || ir.events["DELETED"] != 1 {
			t.Errorf("events %v, want 3 added, 1 updated, 1 deleted", ir.events)
		}
		if ir.objects != 2 {
			t.Errorf("objects after the last event %d, want 2", ir.objects)
		}
		if ir.requests["list "] < 1 || ir.requests["watch "] < 1 {
			t.Errorf("requests %v, want a successful list and watch", ir.requests)
		}
		if ir.queued == 0 || ir.latencies == 0 {
			t.Errorf("client-go's FIFO metrics: %d queue depths, %d latencies, want some", ir.queued, ir.latencies)
		}
		if ir.storeRV != 13 {
			t.Errorf("store resourceVersion %v, want 13 (the update's)", ir.storeRV)
		}
		return true
	})

	h.Release()
	waitFor(t, func() bool { return ir.read(func(ir *informerRecord) bool { return ir.stopped }) })
	waitFor(t, func() bool { return rec.lastCounts() == [2]int{0, 0} })

	// The same informer again: a new metrics.Informer, client-go's metrics
	// on for it too.
	h2 := f.ForResource(widgets, WithNamespaces("a"))
	waitFor(t, h2.Informer().HasSynced)
	recs = rec.all()
	if len(recs) != 2 {
		t.Fatalf("%d informers reported after re-creation, want 2", len(recs))
	}
	waitFor(t, func() bool {
		return recs[1].read(func(ir *informerRecord) bool { return ir.latencies > 0 && ir.events["ADDED"] == 2 })
	})
	f.Shutdown()
	if got := rec.lastCounts(); got != [2]int{0, 0} {
		t.Errorf("after Shutdown: wanted/running %v, want [0 0]", got)
	}
	for i, ir := range rec.all() {
		ir.read(func(ir *informerRecord) bool {
			if !ir.stopped {
				t.Errorf("informer %d: states %v; want Stopped last", i, ir.states)
			}
			if ir.callsAfterStop != 0 || ir.repeatedState != 0 {
				t.Errorf("informer %d: %d calls after Stopped, %d states repeated", i, ir.callsAfterStop, ir.repeatedState)
			}
			return true
		})
	}
	checkNoLeaks(t, before)
}

// Failed requests are reported by reason: the server's (Forbidden), a
// server that cannot be reached (ConnectionError); a watch the server
// closes is a restart.
// Lost contact on a synced informer: the exporter is told Stale, then
// Synced again; neither is a new complete list (Synced() is not called),
// and a Stale informer still runs.
func TestMetricsStale(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(rvWidget("a", "w1", "10"))
	rec := &recorder{}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Metrics: rec})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	ir := rec.all()[0]
	waitFor(t, func() bool { return ir.read(func(ir *informerRecord) bool { return ir.synced == 1 }) })
	h.e.contact(&url.Error{Op: "Get", URL: "https://api/apis/demo.example.com/v1/widgets", Err: syscall.ECONNREFUSED})
	if got := rec.lastCounts(); got != [2]int{1, 1} {
		t.Errorf("Stale: wanted/running %v, want [1 1]", got)
	}
	h.e.contact(nil)
	ir.read(func(ir *informerRecord) bool {
		if want := []State{Pending, Syncing, Synced, Stale, Synced}; !slices.Equal(ir.states, want) {
			t.Errorf("states %v, want %v", ir.states, want)
		}
		if ir.synced != 1 {
			t.Errorf("Synced reported %d times, want 1 (contact lost and back is no new list)", ir.synced)
		}
		return true
	})
	f.Shutdown()
	checkNoLeaks(t, before)
}

func TestMetricsRequestsByReason(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(rvWidget("a", "w1", "10"))
	var lists atomic.Int32
	client.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		switch lists.Add(1) {
		case 1:
			return true, nil, apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("no access"))
		case 2:
			return true, nil, &url.Error{Op: "Get", URL: "https://api", Err: syscall.ECONNREFUSED}
		}
		return false, nil, nil
	})
	var watchers sync.Mutex
	var open []*watch.FakeWatcher
	client.PrependWatchReactor("widgets", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watchers.Lock()
		open = append(open, w)
		watchers.Unlock()
		return true, w, nil
	})
	rec := &recorder{}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Metrics: rec})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	waitFor(t, h.Informer().HasSynced)
	ir := rec.all()[0]
	// The server closes the watch.
	watchers.Lock()
	open[0].Stop()
	watchers.Unlock()
	waitFor(t, func() bool {
		return ir.read(func(ir *informerRecord) bool { return ir.restarts == 1 && ir.requests["watch "] >= 2 })
	})
	ir.read(func(ir *informerRecord) bool {
		want := map[string]int{"list Forbidden": 1, "list ConnectionError": 1}
		for k, n := range want {
			if ir.requests[k] != n {
				t.Errorf("requests[%q] = %d, want %d (all: %v)", k, ir.requests[k], n, ir.requests)
			}
		}
		if ir.requests["list "] < 1 {
			t.Errorf("no successful list reported: %v", ir.requests)
		}
		// Failed stays Failed until a list succeeds; then Synced.
		if !slices.Contains(ir.states, Failed) || ir.states[len(ir.states)-1] != Synced {
			t.Errorf("states %v, want Failed, then Synced last", ir.states)
		}
		return true
	})
	f.Shutdown()
	// Stopping the informer ends its watch: not a restart.
	ir.read(func(ir *informerRecord) bool {
		if ir.restarts != 1 {
			t.Errorf("restarts after shutdown %d, want 1", ir.restarts)
		}
		return true
	})
	checkNoLeaks(t, before)
}

func TestRequestReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("x")), "Forbidden"},
		{apierrors.NewTooManyRequests("slow down", 1), "TooManyRequests"},
		{apierrors.NewResourceExpired("old"), "Expired"},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Code: 500}}, "Unknown"},
		{&url.Error{Op: "Get", URL: "https://api", Err: syscall.ECONNRESET}, "ConnectionError"},
		{fmt.Errorf("watch: %w", listwatch.ErrWatchNotAnswered), "Timeout"},
		{errors.New("decode failed"), "Unknown"},
	} {
		if got := requestReason(c.err); got != c.want {
			t.Errorf("requestReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// Without Options.Metrics an informer has no metrics machinery: no handler, no
// client-go metrics name.
func TestNoMetricsNoCost(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	h := f.ForResource(widgets)
	if h.e.metrics != nil || h.e.server.Hooks.Request != nil || h.e.server.Hooks.WatchEnded != nil {
		t.Fatal("an informer of a factory without metrics has metrics hooks")
	}
}

// An informer that follows another version reports under its new GVR from
// then on: the old metrics.Informer is Stopped, the new one starts at the
// informer's state and sees the relist; the informer counts stay.
func TestMetricsFollowVersion(t *testing.T) {
	before := runtime.NumGoroutine()
	v2 := widgets.GroupResource().WithVersion("v2")
	w := rvWidget("a", "w1", "10")
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		widgets: "WidgetList", v2: "WidgetList",
	}, w)
	rec := &recorder{}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Metrics: rec})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	waitFor(t, h.Informer().HasSynced)
	h.e.MoveTo("v2", "test")
	waitFor(t, func() bool { return len(rec.all()) == 2 })
	old, moved := rec.all()[0], rec.all()[1]
	// (With the fake client the relist's list carries no resourceVersion,
	// so the informer does not get back to Synced: the test stops at
	// Syncing.)
	waitFor(t, func() bool {
		return moved.read(func(ir *informerRecord) bool { return len(ir.states) >= 2 })
	})
	old.read(func(ir *informerRecord) bool {
		if !ir.stopped || ir.id.GVR != widgets {
			t.Errorf("old record: stopped %v, GVR %v; want stopped, %v", ir.stopped, ir.id.GVR, widgets)
		}
		return true
	})
	moved.read(func(ir *informerRecord) bool {
		if ir.id.GVR != v2 {
			t.Errorf("new record GVR %v, want %v", ir.id.GVR, v2)
		}
		if want := []State{Synced, Syncing}; !slices.Equal(ir.states[:2], want) {
			t.Errorf("new record states %v, want %v first", ir.states, want)
		}
		return true
	})
	if got := rec.lastCounts(); got != [2]int{1, 1} {
		t.Errorf("wanted/running %v, want [1 1] (one informer, Syncing)", got)
	}
	f.Shutdown()
	checkNoLeaks(t, before)
}
