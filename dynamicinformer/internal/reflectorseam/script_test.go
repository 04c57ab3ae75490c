package reflectorseam

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

// requestTimeout bounds every wait for the reflector's next request.
const requestTimeout = 10 * time.Second

// informerBackoffFloor is the least the reflector of a SharedIndexInformer
// waits before a ListAndWatch that follows another: client-go's
// defaultBackoffInit (reflector.go), jittered upwards only.
const informerBackoffFloor = 800 * time.Millisecond

// script is a ListerWatcher the test answers by hand: every request is
// handed to the test (next), which answers it (list, watch, fail). The
// reflector's goroutine blocks until then, so the test sees each request
// in the reflector's order and nothing happens between them.
type script struct {
	requests    chan *request
	noWatchList bool
}

func newScript(noWatchList bool) *script {
	return &script{requests: make(chan *request), noWatchList: noWatchList}
}

type request struct {
	verb   string // "list" or "watch"
	opts   metav1.ListOptions
	at     time.Time
	answer chan answer
}

type answer struct {
	obj runtime.Object
	w   watch.Interface
	err error
}

func (s *script) ask(ctx context.Context, verb string, opts metav1.ListOptions) (answer, error) {
	r := &request{verb: verb, opts: opts, at: time.Now(), answer: make(chan answer, 1)}
	select {
	case s.requests <- r:
	case <-ctx.Done():
		return answer{}, ctx.Err()
	}
	select {
	case a := <-r.answer:
		return a, nil
	case <-ctx.Done():
		return answer{}, ctx.Err()
	}
}

func (s *script) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	a, err := s.ask(ctx, "list", opts)
	if err != nil {
		return nil, err
	}
	return a.obj, a.err
}

func (s *script) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	a, err := s.ask(ctx, "watch", opts)
	if err != nil {
		return nil, err
	}
	if a.err != nil {
		return nil, a.err
	}
	return a.w, nil
}

func (s *script) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

func (s *script) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported is client-go's watchlist contract.
func (s *script) IsWatchListSemanticsUnSupported() bool { return s.noWatchList }

// next returns the reflector's next request, failing the test unless it
// comes within requestTimeout and is a verb ("list", "watch" or
// "watch-list"). why names the client-go behaviour expected.
func (s *script) next(t *testing.T, verb, why string) *request {
	t.Helper()
	select {
	case r := <-s.requests:
		got := r.verb
		if got == "watch" && WatchListRequested(r.opts) {
			got = "watch-list"
		}
		if got != verb {
			r.answer <- answer{err: context.Canceled}
			t.Fatalf("client-go's reflector sent a %s (%s), want a %s: %s", got, describe(r.opts), verb, why)
		}
		return r
	case <-time.After(requestTimeout):
		t.Fatalf("client-go's reflector sent no request within %v, want a %s: %s", requestTimeout, verb, why)
		return nil
	}
}

// describe is what a test may check of a request's options.
func describe(o metav1.ListOptions) string {
	return fmt.Sprintf("resourceVersion %q, match %q, sendInitialEvents %v, bookmarks %v",
		o.ResourceVersion, o.ResourceVersionMatch, WatchListRequested(o), o.AllowWatchBookmarks)
}

func (r *request) list(obj runtime.Object) { r.answer <- answer{obj: obj} }
func (r *request) fail(err error)          { r.answer <- answer{err: err} }

// watch answers with a new scripted watch.
func (r *request) watch() *watch.RaceFreeFakeWatcher {
	w := watch.NewRaceFreeFake()
	r.answer <- answer{w: w}
	return w
}

// gap is how long after t the request was sent.
func (r *request) gap(t time.Time) time.Duration { return r.at.Sub(t) }

func widget(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetNamespace("a")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

func widgetList(rv string, items ...*unstructured.Unstructured) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion(rv)
	for _, it := range items {
		l.Items = append(l.Items, *it.DeepCopy())
	}
	return l
}

func bookmark(rv string, endsInitialEvents bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetResourceVersion(rv)
	if endsInitialEvents {
		u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return u
}

// watchList sets client-go's WatchListClient feature for the test.
func watchList(t *testing.T, on bool) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, on)
}

// noBackoff is a backoff no test waits out: a request that comes within
// requestTimeout did not go through the reflector's backoff.
var noBackoff = &wait.Backoff{Duration: time.Hour, Cap: time.Hour, Steps: 1 << 20, Factor: 1}

// runReflector runs client-go's Reflector over lw into a real store,
// with backoff, until the test ends; it fails the test if the reflector
// does not stop, or leaves goroutines behind.
func runReflector(t *testing.T, lw toolscache.ListerWatcher, backoff *wait.Backoff) (*toolscache.Reflector, toolscache.Store) {
	t.Helper()
	leaks := leakcheck.Snapshot("k8s.io/client-go/tools/cache")
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	r := toolscache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, store, toolscache.ReflectorOptions{
		Name:    t.Name(),
		Backoff: backoff,
	})
	run(t, r.RunWithContext, leaks)
	return r, store
}

// informer is a SharedIndexInformer run over a script, with the watch
// error handler's errors and the handlers' events recorded.
type informer struct {
	toolscache.SharedIndexInformer
	mu     sync.Mutex // guards errs
	errs   []error
	events chan event
}

type event struct {
	verb      string // add, update, delete
	obj       interface{}
	inInitial bool
}

func runInformer(t *testing.T, lw toolscache.ListerWatcher) *informer {
	t.Helper()
	leaks := leakcheck.Snapshot("k8s.io/client-go/tools/cache")
	inf := &informer{
		SharedIndexInformer: toolscache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, toolscache.SharedIndexInformerOptions{}),
		events:              make(chan event, 100),
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		inf.mu.Lock()
		inf.errs = append(inf.errs, err)
		inf.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj interface{}, initial bool) { inf.events <- event{"add", obj, initial} },
		UpdateFunc: func(_, obj interface{}) { inf.events <- event{"update", obj, false} },
		DeleteFunc: func(obj interface{}) { inf.events <- event{"delete", obj, false} },
	}); err != nil {
		t.Fatal(err)
	}
	run(t, inf.RunWithContext, leaks)
	return inf
}

// handlerErrors returns what the watch error handler was told so far.
func (inf *informer) handlerErrors() []error {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	return append([]error(nil), inf.errs...)
}

// nextEvent returns the handlers' next event within requestTimeout.
func (inf *informer) nextEvent(t *testing.T, why string) event {
	t.Helper()
	select {
	case ev := <-inf.events:
		return ev
	case <-time.After(requestTimeout):
		t.Fatalf("no handler event within %v: %s", requestTimeout, why)
		return event{}
	}
}

// run runs f until the test ends, then checks that it returned and left
// no goroutine of client-go's cache package behind.
func run(t *testing.T, f func(context.Context), leaks func(testing.TB)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(requestTimeout):
			t.Errorf("client-go's reflector did not stop within %v of its context's end", requestTimeout)
			return
		}
		leaks(t)
	})
}

func key(obj interface{}) string {
	k, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k
}

// eventually fails the test unless cond holds within requestTimeout
// (what: what should hold). It is for state client-go updates on another
// goroutine than the one that told the test.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(requestTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", requestTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
