package gate

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widget(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetNamespace("a")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// stubLW is the server: lists answer the objects in items at "10" (or
// err); watches are fake streams the test feeds.
type stubLW struct {
	mu       sync.Mutex // guards everything below
	items    []*unstructured.Unstructured
	listErr  error
	watchErr error
	pageSize int // > 0: lists answer pages of this many items (continue: the next index)
	lists    []metav1.ListOptions
	watchOps []metav1.ListOptions
	watches  []*watch.RaceFreeFakeWatcher
	onWatch  func() // called (without mu) at the start of each watch request
	onList   func() // called (without mu) at the start of each list request
}

func (s *stubLW) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	onList := s.onList
	s.mu.Unlock()
	if onList != nil {
		onList()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, o)
	if s.listErr != nil {
		return nil, s.listErr
	}
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion("10")
	items := s.items
	if s.pageSize > 0 {
		from, _ := strconv.Atoi(o.Continue)
		items = items[min(from, len(items)):]
		if len(items) > s.pageSize {
			items = items[:s.pageSize]
			l.SetContinue(strconv.Itoa(from + s.pageSize))
		}
	}
	for _, it := range items {
		l.Items = append(l.Items, *it.DeepCopy())
	}
	return l, nil
}

func (s *stubLW) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	on := s.onWatch
	s.mu.Unlock()
	if on != nil {
		on()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchOps = append(s.watchOps, o)
	if s.watchErr != nil {
		return nil, s.watchErr
	}
	w := watch.NewRaceFreeFake()
	s.watches = append(s.watches, w)
	return w, nil
}

func (s *stubLW) set(f func(s *stubLW)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *stubLW) counts() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lists), len(s.watchOps)
}

func (s *stubLW) lastList() metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[len(s.lists)-1]
}

func (s *stubLW) lastWatch() (metav1.ListOptions, *watch.RaceFreeFakeWatcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchOps[len(s.watchOps)-1], s.watches[len(s.watches)-1]
}

// hookLog records the gate's and the liveness layer's hook calls.
type hookLog struct {
	mu     sync.Mutex // guards events, listedRVs
	events []string
	listed []string
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
func (h *hookLog) has(e string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.events {
		if x == e {
			return true
		}
	}
	return false
}
func (h *hookLog) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

func (h *hookLog) hooks() Hooks {
	return Hooks{
		ListStarted: func() { h.add("listStarted") },
		Listed: func(rv string) {
			h.mu.Lock()
			h.listed = append(h.listed, rv)
			h.mu.Unlock()
			h.add("listed")
		},
		NotFound: func(error) { h.add("notFound") },
		Emptied:  func(string) { h.add("emptied") },
		Waiting:  func(string) { h.add("waiting") },
	}
}

// cache is the informer's cache as the gate sees it.
type cache struct {
	mu   sync.Mutex // guards objs
	objs []interface{}
}

func (c *cache) list() []interface{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]interface{}(nil), c.objs...)
}

func (c *cache) set(objs ...interface{}) {
	c.mu.Lock()
	c.objs = objs
	c.mu.Unlock()
}

type fixture struct {
	lw    *ListerWatcher
	inner *stubLW
	hooks *hookLog
	cache *cache
}

// newFixture builds a ListerWatcher as the factory does: the gate above a
// liveness layer above the stub server. The server holds w1; so does the
// cache.
func newFixture(t *testing.T, open bool, idle time.Duration) *fixture {
	t.Helper()
	inner := &stubLW{items: []*unstructured.Unstructured{widget("w1", "5")}}
	h := &hookLog{}
	c := &cache{objs: []interface{}{widget("w1", "5")}}
	lw := &ListerWatcher{
		Gate: New(open),
		Server: &listwatch.Liveness{Inner: inner, Idle: idle, Hooks: listwatch.LivenessHooks{
			Silent: func(time.Duration, string) { h.add("silent") },
		}},
		Hooks: h.hooks(),
		EmptyList: func(rv string) runtime.Object {
			l, _ := listwatch.UnstructuredLists(func() schema.GroupVersionResource { return widgets })(rv, nil)
			return l
		},
		Cached: c.list,
		AsWatched: func(obj interface{}) runtime.Object {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil
			}
			return u.DeepCopy()
		},
		Bookmark: func(rv string) runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetResourceVersion(rv)
			return u
		},
	}
	return &fixture{lw: lw, inner: inner, hooks: h, cache: c}
}

func leaks(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/dynamicinformer")
	t.Cleanup(func() { check(t) })
}

// drain reads a watch's events until it closes (n < 0) or n events came.
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

func summary(evs []watch.Event) []string {
	var out []string
	for _, ev := range evs {
		if st, ok := ev.Object.(*metav1.Status); ok {
			out = append(out, string(ev.Type)+":"+string(st.Reason))
			continue
		}
		m, _ := meta.Accessor(ev.Object)
		out = append(out, string(ev.Type)+":"+m.GetName()+"@"+m.GetResourceVersion())
	}
	return out
}

// listAndWatch lists through lw and opens a watch from the list.
func listAndWatch(t *testing.T, lw *ListerWatcher) watch.Interface {
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

type result struct {
	w   watch.Interface
	err error
}

// watchAsync opens a watch on another goroutine.
func watchAsync(lw *ListerWatcher, opts metav1.ListOptions) <-chan result {
	done := make(chan result, 1)
	go func() {
		w, err := lw.WatchWithContext(context.Background(), opts)
		done <- result{w, err}
	}()
	return done
}

// returned waits (a few seconds at most) for the watch opened by
// watchAsync to return.
func returned(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting watch did not return")
		return result{}
	}
}

func notReturned(t *testing.T, done <-chan result, d time.Duration) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("watch returned (%v) while it should wait", r.err)
	case <-time.After(d):
	}
}

func notFound() error { return apierrors.NewNotFound(widgets.GroupResource(), "") }

func truePtr() *bool { b := true; return &b }

// deliver has k observe ev and records it as taken by the reader (what a
// stream does around its send).
func deliver(k *KeySet, ev watch.Event) {
	if taken := k.observe(ev); taken != nil {
		taken()
	}
}
