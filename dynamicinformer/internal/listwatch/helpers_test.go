package listwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

func widget(ns, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// widgetList is a list of the given objects at rv.
func widgetList(rv string, items ...*unstructured.Unstructured) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion(rv)
	for _, it := range items {
		l.Items = append(l.Items, *it)
	}
	return l
}

// liveLW is a ListerWatcher whose watches are fake streams the test
// feeds, or (block) requests that are answered only when their context
// ends, as a client-go request retrying 429s is not.
type liveLW struct {
	mu        sync.Mutex // guards everything below
	listErr   error
	watchErr  error
	lists     []metav1.ListOptions
	watches   []*watch.RaceFreeFakeWatcher
	watchOpts []metav1.ListOptions
	block     bool
	blockErr  chan error // what a blocked request returned (its context's error)
}

func newLiveLW() *liveLW { return &liveLW{blockErr: make(chan error, 10)} }

func (s *liveLW) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, o)
	if s.listErr != nil {
		return nil, s.listErr
	}
	return widgetList("10", widget("a", "w1", "5")), nil
}

func (s *liveLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	s.watchOpts = append(s.watchOpts, o)
	block, werr := s.block, s.watchErr
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		s.blockErr <- ctx.Err()
		return nil, ctx.Err()
	}
	if werr != nil {
		return nil, werr
	}
	w := watch.NewRaceFreeFake()
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	return w, nil
}

func (s *liveLW) set(f func(s *liveLW)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *liveLW) counts() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lists), len(s.watchOpts)
}

func (s *liveLW) lastList() metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[len(s.lists)-1]
}

func (s *liveLW) watch(i int) *watch.RaceFreeFakeWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[i]
}

// hookLog records liveness hook calls.
type hookLog struct {
	mu       sync.Mutex // guards events, contacts
	events   []string
	contacts []error
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
func (h *hookLog) hooks() LivenessHooks {
	return LivenessHooks{
		Silent: func(time.Duration, string) { h.add("silent") },
		Contact: func(err error) {
			h.mu.Lock()
			h.contacts = append(h.contacts, err)
			h.mu.Unlock()
		},
	}
}

func (h *hookLog) lastContact() (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.contacts) == 0 {
		return nil, false
	}
	return h.contacts[len(h.contacts)-1], true
}

func newLiveness(idle time.Duration) (*Liveness, *liveLW, *hookLog) {
	inner := newLiveLW()
	h := &hookLog{}
	return &Liveness{Inner: inner, Idle: idle, Hooks: h.hooks()}, inner, h
}

// next reads one event, failing after timeout; ok false: the stream closed.
func next(t *testing.T, w watch.Interface, timeout time.Duration) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
		return watch.Event{}, false
	}
}

// drain reads until the stream closes.
func drain(t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	var out []watch.Event
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("stream still open after 5s (%d events)", len(out))
		}
	}
}

func isExpiredEvent(ev watch.Event) bool {
	st, ok := ev.Object.(*metav1.Status)
	return ev.Type == watch.Error && ok && apierrors.IsResourceExpired(apierrors.FromObject(st))
}

func bookmark(rv string) runtime.Object {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetResourceVersion(rv)
	return u
}

func truePtr() *bool { b := true; return &b }

// leaks returns the goroutine check every test that starts a stream runs
// after shutting everything down.
func leaks(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/dynamicinformer")
	t.Cleanup(func() { check(t) })
}
