package dynamicinformer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

type countUpdates struct {
	toolscache.ResourceEventHandlerFuncs
	n *int
}

func (c countUpdates) OnUpdate(_, _ interface{}) { *c.n++ }

func TestSkipUnchanged(t *testing.T) {
	n := 0
	h := skipUnchanged{countUpdates{n: &n}}
	h.OnUpdate(diskObject(1), diskObject(1)) // a relist's replacement at the same resourceVersion: dropped
	changed := diskObject(1)
	changed.SetResourceVersion("99999")
	h.OnUpdate(diskObject(1), changed) // a real change
	cached := diskObject(1)
	h.OnUpdate(cached, cached) // a resync: the cached object as old and new
	noRV := widget("a", "w", nil)
	h.OnUpdate(noRV, noRV.DeepCopy()) // no resourceVersion to compare: delivered
	moved := diskObject(1)
	moved.SetAPIVersion("example.com/v2")
	h.OnUpdate(diskObject(1), moved) // the same resourceVersion at a new version (MoveTo): delivered
	if n != 4 {
		t.Fatalf("%d updates delivered, want 4 (the change, the resync, the one without a resourceVersion, the one at a new version)", n)
	}
}

// events counts what one handler is given, by key, and signals each
// event.
type events struct {
	mu      sync.Mutex // guards the maps
	added   map[string]int
	updated map[string]int
	deleted map[string]int
	resyncs int // updates with old and new the same object
	signal  chan struct{}
}

func newEvents() *events {
	return &events{added: map[string]int{}, updated: map[string]int{}, deleted: map[string]int{}, signal: make(chan struct{}, 1)}
}

func (e *events) note(m map[string]int, obj interface{}) {
	k, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	e.mu.Lock()
	m[k]++
	e.mu.Unlock()
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

func (e *events) OnAdd(obj interface{}, _ bool) { e.note(e.added, obj) }
func (e *events) OnUpdate(old, obj interface{}) {
	if sameObject(old, obj) {
		e.mu.Lock()
		e.resyncs++
		e.mu.Unlock()
	}
	e.note(e.updated, obj)
}
func (e *events) OnDelete(obj interface{}) { e.note(e.deleted, obj) }

// total is the number of adds, updates and deletes.
func (e *events) total() (added, updated, deleted, resyncs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	return sum(e.added), sum(e.updated), sum(e.deleted), e.resyncs
}

// await waits, without sleeping, until cond holds after one of e's
// events (or now).
func (e *events) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	awaitSignal(t, e.signal, what, cond)
}

// awaitSignal waits until cond holds, checking it at each signal.
func awaitSignal(t *testing.T, signal <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-signal:
		case <-deadline.C:
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}

// signalingRecorder is a recorder that signals each event it is told.
type signalingRecorder struct {
	*recorder
	signal chan struct{}
}

func (r signalingRecorder) NewInformer(id metrics.Identity) metrics.Informer {
	return signalingInformer{r.recorder.NewInformer(id), r.signal}
}

type signalingInformer struct {
	metrics.Informer
	signal chan struct{}
}

func (i signalingInformer) Event(t string, objects int) {
	i.Informer.Event(t, objects)
	select {
	case i.signal <- struct{}{}:
	default:
	}
}

func numberedWidget(i int, rv string) *unstructured.Unstructured {
	w := widget("a", fmt.Sprintf("w%03d", i), nil)
	w.SetResourceVersion(rv)
	return w
}

// A relist tells handlers only what changed: with 100 cached objects of
// which 3 are stale in the cache (as if their updates were lost in an
// outage), one missing and one that the server no longer has, the
// relist delivers 3 updates, 1 add and 1 delete to a handler, and no
// update for the 96 unchanged objects. A handle WithUnchangedRelistUpdates
// (same informer) gets client-go's 99 updates. The informer's metrics
// count the default delivery.
func TestRelistDeliversOnlyChanges(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	const n = 100
	var objs []kruntime.Object
	for i := range n {
		objs = append(objs, numberedWidget(i, "10"))
	}
	client := fakeClient(objs...)
	rec := &recorder{}
	metricEvents := make(chan struct{}, 1)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Metrics: signalingRecorder{rec, metricEvents}})
	h := f.ForResource(widgets)
	storm := f.ForResource(widgets, WithUnchangedRelistUpdates())
	if h.e != storm.e {
		t.Fatal("WithUnchangedRelistUpdates made an informer of its own; it is per handle")
	}
	quiet, loud := newEvents(), newEvents()
	if _, err := h.Informer().AddEventHandler(quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := storm.Informer().AddEventHandler(loud); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	quiet.await(t, "initial adds", func() bool { a, _, _, _ := quiet.total(); return a == n })
	loud.await(t, "initial adds", func() bool { a, _, _, _ := loud.total(); return a == n })

	// The cache drifts from the server: three objects at an older
	// version, one lost, one the server does not have.
	idx := h.Informer().GetIndexer()
	for i := range 3 {
		if err := idx.Update(numberedWidget(i, "9")); err != nil {
			t.Fatal(err)
		}
	}
	lost, _, _ := idx.GetByKey("a/w050")
	if err := idx.Delete(lost); err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(numberedWidget(999, "10")); err != nil {
		t.Fatal(err)
	}
	h.e.lw.Relist()
	// The storm handler sees the relist through: every object listed
	// that the cache held is an update, the lost one an add.
	loud.await(t, "client-go's relist", func() bool {
		a, u, d, _ := loud.total()
		return u == n-1 && a == n+1 && d == 1
	})
	// A last change through the watch: events to a handler are ordered,
	// so once the quiet handler has it, it has had all of the relist.
	last := numberedWidget(n-1, "11")
	if _, err := client.Resource(widgets).Namespace("a").Update(ctx, last, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	quiet.await(t, "the change after the relist", func() bool {
		quiet.mu.Lock()
		defer quiet.mu.Unlock()
		return quiet.updated[fmt.Sprintf("a/w%03d", n-1)] == 1
	})
	a, u, d, r := quiet.total()
	if a != n+1 || u != 3+1 || d != 1 || r != 0 {
		t.Fatalf("default handler: added %d, updated %d, deleted %d (resyncs %d); want %d, 4 (3 stale + the last change), 1, 0", a, u, d, r, n+1)
	}
	for i := range 3 {
		if k := fmt.Sprintf("a/w%03d", i); quiet.updated[k] != 1 {
			t.Fatalf("%s updated %d times, want 1", k, quiet.updated[k])
		}
	}
	if quiet.deleted["a/w999"] != 1 || quiet.added["a/w050"] != 2 {
		t.Fatalf("deleted %v, added a/w050 %d times: want the ghost deleted and the lost object added again", quiet.deleted, quiet.added["a/w050"])
	}
	// Metrics count what handlers get by default (the metrics handler
	// may lag the quiet one: wait for its last event too).
	ir := rec.all()[0]
	awaitSignal(t, metricEvents, "the metrics of the last change", func() bool {
		return ir.read(func(ir *informerRecord) bool { return ir.events[eventUpdated] >= 4 })
	})
	ir.read(func(ir *informerRecord) bool {
		if ir.events[eventUpdated] != 4 || ir.events[eventAdded] != n+1 || ir.events[eventDeleted] != 1 {
			t.Errorf("metrics events %v, want ADDED %d, UPDATED 4, DELETED 1", ir.events, n+1)
		}
		return true
	})
	f.Shutdown()
	noLeaks(t)
}

// A handler with a resync period still gets its resyncs (every cached
// object, old and new the same object), and a relist still tells it
// only what changed.
func TestResyncSurvivesSkipUnchanged(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	const n = 20
	var objs []kruntime.Object
	for i := range n {
		objs = append(objs, numberedWidget(i, "10"))
	}
	client := fakeClient(objs...)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets, WithResyncPeriod(time.Second))
	ev := newEvents()
	if _, err := h.Informer().AddEventHandler(ev); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	ev.await(t, "two resyncs", func() bool { _, _, _, r := ev.total(); return r >= 2*n })
	_, u, _, r := ev.total()
	if u != r {
		t.Fatalf("%d updates, %d of them resyncs: want only resyncs", u, r)
	}
	f.Shutdown()
	noLeaks(t)
}
