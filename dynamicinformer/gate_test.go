package dynamicinformer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// stubLW answers lists with one object at resourceVersion "10" (or err).
type stubLW struct {
	mu      sync.Mutex
	err     error
	lists   int
	watches int
	lastRV  string
}

func (s *stubLW) ListWithContext(_ context.Context, o metav1.ListOptions) (kruntime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	s.lastRV = o.ResourceVersion
	if s.err != nil {
		return nil, s.err
	}
	return oneWidgetList(), nil
}

func (s *stubLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches++
	if s.err != nil {
		return nil, s.err
	}
	return watch.NewFake(), nil
}

type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (h *hookLog) add(e string) { h.mu.Lock(); h.events = append(h.events, e); h.mu.Unlock() }
func (h *hookLog) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return ""
	}
	return h.events[len(h.events)-1]
}
func (h *hookLog) listStarted()                 { h.add("listStarted") }
func (h *hookLog) listSucceeded(string)         { h.add("listSucceeded") }
func (h *hookLog) notFound(error)               { h.add("notFound") }
func (h *hookLog) emptied(string)               { h.add("emptied") }
func (h *hookLog) waiting(string)               { h.add("waiting") }
func (h *hookLog) silent(time.Duration, string) { h.add("silent") }

func newTestGate(open bool) (*gatedListerWatcher, *stubLW, *hookLog) {
	inner := &stubLW{}
	hooks := &hookLog{}
	g := newGate(open)
	empty := unstructuredList(func() schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: "widgets"}
	})
	return &gatedListerWatcher{inner: inner, gate: g, hooks: hooks,
		emptyList: func(rv string) kruntime.Object { o, _ := empty(rv, nil); return o },
		cached:    func() []interface{} { return []interface{}{widget("a", "w1", nil)} },
		asWatched: asWatched(false),
		bookmark:  bookmarkObject(false),
	}, inner, hooks
}

func TestGatePendingListBlocksUntilOpen(t *testing.T) {
	lw, inner, hooks := newTestGate(false)
	done := make(chan kruntime.Object)
	go func() {
		o, _ := lw.ListWithContext(context.Background(), metav1.ListOptions{})
		done <- o
	}()
	select {
	case <-done:
		t.Fatal("List returned while the resource was never served")
	case <-time.After(100 * time.Millisecond):
	}
	if hooks.last() != "waiting" || inner.lists != 0 {
		t.Fatalf("hooks %v, lists %d", hooks.events, inner.lists)
	}
	lw.gate.set(true, "", false)
	o := <-done
	if rv, _ := metaListRV(o); rv != "10" {
		t.Fatalf("got list rv %q, want the server's", rv)
	}
}

func TestGatePendingListHonoursContext(t *testing.T) {
	lw, _, _ := newTestGate(false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

// drain reads a watch's events until it closes or n events came.
func drain(t *testing.T, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var out []watch.Event
	timeout := time.After(5 * time.Second)
	for n < 0 || len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("watch: got %d events before the timeout", len(out))
		}
	}
	return out
}

func eventSummary(evs []watch.Event) []string {
	var out []string
	for _, ev := range evs {
		m, _ := meta.Accessor(ev.Object)
		out = append(out, string(ev.Type)+":"+m.GetName()+"@"+m.GetResourceVersion())
	}
	return out
}

func TestGateRemovalAndReturnInStream(t *testing.T) {
	lw, inner, hooks := newTestGate(true)
	ctx := context.Background()
	listAndWatch(t, lw).Stop() // the reflector stops a watch it leaves
	lists, watches := inner.lists, inner.watches
	// The resource goes away: the next watch delivers a delete per cached
	// object and a bookmark at the synthetic version, then ends.
	lw.gate.set(false, "CRD deleted", false)
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	got := eventSummary(drain(t, w, -1))
	if want := []string{"DELETED:w1@", "BOOKMARK:@" + syntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("removal stream %v, want %v", got, want)
	}
	if hooks.last() != "emptied" {
		t.Fatalf("hooks %v", hooks.events)
	}
	// Watch-list requests fall back to list; plain watches wait quietly.
	yes := true
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &yes}); !errors.Is(err, errNotServedFallback) {
		t.Fatalf("watch-list while removed: %v", err)
	}
	type result struct {
		w   watch.Interface
		err error
	}
	watchDone := make(chan result)
	go func() {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: syntheticRV})
		watchDone <- result{w, err}
	}()
	select {
	case r := <-watchDone:
		t.Fatalf("watch returned while removed: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if inner.lists != lists || inner.watches != watches {
		t.Fatalf("requests reached the server while removed: lists %d->%d, watches %d->%d", lists, inner.lists, watches, inner.watches)
	}
	// Served again: the waiting watch lists (without the synthetic
	// resourceVersion), delivers an add per object and a bookmark at the
	// list's version, then forwards the server's watch.
	lw.gate.set(true, "", false)
	r := <-watchDone
	if r.err != nil {
		t.Fatal(r.err)
	}
	got = eventSummary(drain(t, r.w, 2))
	if want := []string{"ADDED:w1@", "BOOKMARK:@10"}; !slices.Equal(got, want) {
		t.Fatalf("return stream %v, want %v", got, want)
	}
	if inner.lastRV != "" || inner.lists != lists+1 || inner.watches != watches+1 {
		t.Fatalf("relist: rv %q sent, lists %d->%d, watches %d->%d", inner.lastRV, lists, inner.lists, watches, inner.watches)
	}
	if !slices.Contains(hooks.events, "listSucceeded") || hooks.last() != "listSucceeded" {
		t.Fatalf("hooks %v", hooks.events)
	}
	r.w.Stop()
}

func TestGateInterruptedRefillRelists(t *testing.T) {
	lw, _, _ := newTestGate(true)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	lw.gate.set(false, "gone", false)
	w, _ := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	drain(t, w, -1)
	lw.gate.set(true, "", false)
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: syntheticRV})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop() // before the adds and the bookmark went out
	drain(t, w, -1)
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after an interrupted refill: %v, want expired (relist)", err)
	}
}

func TestGateRelistWhileClosedAfterRemovalWaits(t *testing.T) {
	lw, inner, hooks := newTestGate(true)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A relist (say after a watch error) while the gate is closed answers
	// the synthetic empty list once, then waits.
	lw.gate.set(false, "gone", false)
	o, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if l := o.(*unstructured.UnstructuredList); len(l.Items) != 0 || l.GetResourceVersion() != syntheticRV {
		t.Fatalf("removed resource listed %d items at %q", len(l.Items), l.GetResourceVersion())
	}
	if hooks.last() != "emptied" || inner.lists != 1 {
		t.Fatalf("hooks %v, lists %d", hooks.events, inner.lists)
	}
	lw.gate.set(true, "", false)
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: syntheticRV}); err != nil {
		t.Fatal(err)
	}
	if inner.lastRV != "" {
		t.Fatalf("synthetic resourceVersion %q sent to the server", inner.lastRV)
	}
}

func TestGateNotFoundClosesViaHook(t *testing.T) {
	lw, inner, hooks := newTestGate(true)
	inner.err = apierrors.NewNotFound(schema.GroupResource{Resource: "widgets"}, "")
	// notFound must close the gate (presence does it); emulate.
	closer := &closingHooks{hookLog: hooks, g: lw.gate}
	lw.hooks = closer
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if inner.lists != 1 {
		t.Fatalf("a 404 led to %d lists, want 1 then waiting", inner.lists)
	}
}

type closingHooks struct {
	*hookLog
	g *gate
}

func (c *closingHooks) notFound(err error) { c.hookLog.notFound(err); c.g.set(false, "404", true) }

// listAndWatch lists through lw and opens a watch from the list.
func listAndWatch(t *testing.T, lw *gatedListerWatcher) watch.Interface {
	t.Helper()
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestGateClosingFinishesTheOpenStream(t *testing.T) {
	lw, inner, hooks := newTestGate(true)
	ctx := context.Background()
	w := listAndWatch(t, lw)
	// The gate closes while the stream is open (young, no events: ending
	// it empty would be a "very short watch" to the reflector): the stream
	// delivers the removal and ends.
	lw.gate.set(false, "CRD deleted", false)
	lw.gateClosed("CRD deleted")
	got := eventSummary(drain(t, w, -1))
	if want := []string{"DELETED:w1@", "BOOKMARK:@" + syntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("finished stream %v, want %v", got, want)
	}
	if hooks.last() != "emptied" || inner.watches != 1 {
		t.Fatalf("hooks %v, watches %d", hooks.events, inner.watches)
	}
	// The next watch waits for the resource (no second removal).
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: syntheticRV}); err == nil {
			w.Stop()
		}
	}()
	select {
	case <-done:
		t.Fatal("watch returned while removed")
	case <-time.After(100 * time.Millisecond):
	}
	lw.gate.set(true, "", false)
	<-done
}

func TestGateRelistEndsStreamExpired(t *testing.T) {
	lw, inner, _ := newTestGate(true)
	ctx := context.Background()
	w := listAndWatch(t, lw)
	lw.relist()
	evs := drain(t, w, -1)
	if len(evs) != 1 || evs[0].Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(evs[0].Object)) {
		t.Fatalf("relist ended the stream with %v, want one expired error", evs)
	}
	o, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil || o == nil || inner.lastRV != "" {
		t.Fatalf("relist: %v, resourceVersion %q sent (want a fresh list)", err, inner.lastRV)
	}
}

func TestGatePendingWatchListWaitsThenStreams(t *testing.T) {
	lw, inner, hooks := newTestGate(false)
	yes := true
	type result struct {
		w   watch.Interface
		err error
	}
	done := make(chan result)
	go func() {
		w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: &yes})
		done <- result{w, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("watch-list returned while pending: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if hooks.last() != "waiting" || inner.watches != 0 {
		t.Fatalf("hooks %v, watches %d", hooks.events, inner.watches)
	}
	// Served: the first sync streams (a watch-list request), it does not
	// fall back to a LIST.
	lw.gate.set(true, "", false)
	r := <-done
	if r.err != nil || inner.watches != 1 || inner.lists != 0 {
		t.Fatalf("err %v, watches %d, lists %d", r.err, inner.watches, inner.lists)
	}
	r.w.Stop()
}

// oneWidgetList is the list the stub ListerWatchers answer: w1 at
// resourceVersion 10.
func oneWidgetList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "List"}}
	l.SetResourceVersion("10")
	l.Items = []unstructured.Unstructured{*widget("a", "w1", nil)}
	return l
}
