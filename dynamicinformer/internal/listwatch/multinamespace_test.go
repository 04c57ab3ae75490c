package listwatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// nsServer serves widgets per namespace; forbidden namespaces answer 403.
type nsServer struct {
	mu        sync.Mutex // guards everything below
	objects   map[string][]*unstructured.Unstructured
	rv        map[string]string
	forbidden map[string]bool
	listOpts  []metav1.ListOptions
	watched   []string
	watchRV   map[string]string // namespace -> resourceVersion its last watch asked from
	watches   map[string]*watch.RaceFreeFakeWatcher
	watchErr  error
}

func newNSServer() *nsServer {
	return &nsServer{
		objects: map[string][]*unstructured.Unstructured{
			"a": {widget("a", "a1", "3"), widget("a", "a2", "4")},
			"b": {widget("b", "b1", "7")},
		},
		rv:        map[string]string{"a": "5", "b": "8"},
		forbidden: map[string]bool{},
		watches:   map[string]*watch.RaceFreeFakeWatcher{},
		watchRV:   map[string]string{},
	}
}

func (s *nsServer) funcs() Funcs {
	return Funcs{
		List: func(_ context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.listOpts = append(s.listOpts, o)
			if s.forbidden[ns] {
				return nil, apierrors.NewForbidden(widgetsGVR.GroupResource(), "", errors.New("namespace "+ns+" refused"))
			}
			return widgetList(s.rv[ns], s.objects[ns]...), nil
		},
		Watch: func(_ context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.watched = append(s.watched, ns)
			s.watchRV[ns] = o.ResourceVersion
			if s.watchErr != nil && ns == "b" {
				return nil, s.watchErr
			}
			w := watch.NewRaceFreeFake()
			s.watches[ns] = w
			return w, nil
		},
	}
}

func (s *nsServer) watchOf(ns string) *watch.RaceFreeFakeWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[ns]
}

func listNames(t *testing.T, obj runtime.Object) []string {
	t.Helper()
	items, err := meta.ExtractList(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		m, _ := meta.Accessor(it)
		out = append(out, m.GetNamespace()+"/"+m.GetName())
	}
	slices.Sort(out)
	return out
}

func newMulti(s *nsServer) (*MultiNamespace, *[]map[string]error) {
	var told []map[string]error
	var mu sync.Mutex
	return &MultiNamespace{
		Funcs: s.funcs(), Namespaces: []string{"a", "b"},
		Selectors: Selectors{Label: "app=x"},
		Lists:     UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Hook: func(l Listed) {
			mu.Lock()
			told = append(told, l.Denied)
			mu.Unlock()
		},
		Recheck: 100 * time.Millisecond,
	}, &told
}

// Lists are concatenated at the highest resourceVersion; watches are
// merged; a second watch of one list answers "expired"; relists are
// consistent.
func TestMultiNamespaceListAndWatch(t *testing.T) {
	leaks(t)
	s := newNSServer()
	lw, told := newMulti(s)
	ctx := context.Background()
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, obj); !slices.Equal(got, []string{"a/a1", "a/a2", "b/b1"}) {
		t.Fatalf("listed %v", got)
	}
	if rv, _ := ListRV(obj); rv != "8" {
		t.Fatalf("list rv %q, want the highest (8)", rv)
	}
	if len(*told) != 1 || len((*told)[0]) != 0 {
		t.Fatalf("forbidden hook told %v, want one call with none", *told)
	}
	for _, o := range s.listOpts {
		if o.LabelSelector != "app=x" {
			t.Fatalf("selector not applied: %+v", o)
		}
	}
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr()}); !errors.Is(err, ErrWatchListDeclined) {
		t.Fatalf("watch-list: %v", err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	// Each namespace is watched from its own list (found by the soak,
	// issue 29): from the highest, a's events between its list (5) and
	// b's (8) would be lost until the next relist.
	s.mu.Lock()
	rvA, rvB := s.watchRV["a"], s.watchRV["b"]
	s.mu.Unlock()
	if rvA != "5" || rvB != "8" {
		t.Fatalf("watched a from %q and b from %q, want each from its own list (5, 8)", rvA, rvB)
	}
	s.watchOf("a").Add(widget("a", "a3", "9"))
	if got := names([]watch.Event{mustNext(t, w)}); !slices.Equal(got, []string{"ADDED:a3"}) {
		t.Fatalf("merged events %v", got)
	}
	s.watchOf("b").Add(widget("b", "b2", "10"))
	if got := names([]watch.Event{mustNext(t, w)}); !slices.Equal(got, []string{"ADDED:b2"}) {
		t.Fatalf("merged events %v", got)
	}
	// No retry timer without forbidden namespaces: still open.
	select {
	case ev, ok := <-w.ResultChan():
		t.Fatalf("merged watch gave %v (open %v)", ev, ok)
	case <-time.After(200 * time.Millisecond):
	}
	// One namespace's watch ends: the merged one ends.
	s.watchOf("b").Stop()
	drain(t, w)
	if !s.watchOf("a").IsStopped() {
		t.Fatal("the other namespace's watch was not stopped")
	}
	// From anything but the last event taken (10), it relists.
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from the list's version after events were taken: %v, want expired", err)
	}
	// A relist asks for a consistent list, whatever the reflector asked.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"}); err != nil {
		t.Fatal(err)
	}
	if o := s.listOpts[len(s.listOpts)-1]; o.ResourceVersion != "" {
		t.Fatalf("relist sent rv %q", o.ResourceVersion)
	}
	// The deprecated entry points go the same way.
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err = lw.Watch(metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	drain(t, w)
	if !lw.IsWatchListSemanticsUnSupported() {
		t.Fatal("merged watches must not stream lists")
	}
}

// A merged watch that ends (a connection cut, the server's timeout) is
// resumed by a watch from the last event the reader took: each namespace
// from its own last event, or its list if it had none, with no list (the
// reflector over one namespace does the same; a relist would also grow
// its shared back-off, up to 30 s, found by
// TestSeveralNamespacesForbiddenStaysCurrent under load). Resumed again
// with no events, from the same versions. Events a stream took but did
// not hand on, a check that found other namespaces, or a refused watch:
// "expired", and a list.
func TestMultiNamespaceResumesFromEachNamespacesLastEvent(t *testing.T) {
	leaks(t)
	s := newNSServer()
	s.objects["c"], s.rv["c"] = []*unstructured.Unstructured{widget("c", "c1", "2")}, "6"
	lw, _ := newMulti(s)
	lw.Namespaces = []string{"a", "b", "c"}
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	lists := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.listOpts)
	}
	listed := lists()
	watchRVs := func() [3]string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return [3]string{s.watchRV["a"], s.watchRV["b"], s.watchRV["c"]}
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatal(err)
	}
	// b's event (12) is taken before a's (11): out of version order.
	s.watchOf("b").Add(widget("b", "b2", "12"))
	mustNext(t, w)
	s.watchOf("a").Modify(widget("a", "a1", "11"))
	mustNext(t, w)
	s.watchOf("c").Stop() // the connection is cut
	drain(t, w)

	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"})
	if err != nil {
		t.Fatalf("watch from the last event taken: %v", err)
	}
	if got, want := watchRVs(), [3]string{"11", "12", "6"}; got != want {
		t.Fatalf("resumed a, b, c from %v, want %v (each from its own last event, c from its list)", got, want)
	}
	if n := lists(); n != listed {
		t.Fatalf("%d lists to resume, want none", n-listed)
	}
	// Ends with nothing taken: resumed from the same versions.
	s.watchOf("a").Stop()
	drain(t, w)
	if w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"}); err != nil {
		t.Fatalf("second resume: %v", err)
	}
	if got, want := watchRVs(), [3]string{"11", "12", "6"}; got != want {
		t.Fatalf("resumed again from %v, want %v", got, want)
	}
	// An event the reader did not take does not move the versions: asked
	// from 13 (which it never took), it relists. (Asked while the event
	// waits: a new watch makes the old one's later hand-ons count for
	// nothing, so draining it below changes nothing.)
	s.watchOf("c").Add(widget("c", "c2", "13"))
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "13"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from a version never taken: %v, want expired", err)
	}
	w.Stop()
	drain(t, w)
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"})
	if err != nil {
		t.Fatal(err)
	}
	// A refused watch: the next watch relists, whatever it asks.
	s.watchOf("b").Error(&apierrors.NewForbidden(widgetsGVR.GroupResource(), "", errors.New("b revoked")).ErrStatus)
	drain(t, w)
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "11"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after a refused one: %v, want expired", err)
	}
	// After a list (b left out until its re-check), its version resumes
	// again.
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := ListRV(obj)
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatalf("watch from the new list: %v", err)
	}
	w.Stop()
	drain(t, w)
}

// A merged watch that ends because its check found other namespaces (a
// refused namespace now answers) is not resumed: the next watch relists,
// from any version, so the list reads that namespace.
func TestMultiNamespaceEndedByACheckRelists(t *testing.T) {
	leaks(t)
	s := newNSServer()
	s.forbidden["b"] = true
	lw, _ := newMulti(s)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.forbidden["b"] = false
	s.mu.Unlock()
	drain(t, w) // ends at the next check (Recheck 100ms)
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after a check found b readable: %v, want expired", err)
	}
}

// Issue 20, defect 14: with one namespace forbidden, the old informer
// delivered nothing at all. Now the list holds the allowed namespace's
// objects, the hook is told which namespace was refused, the watch covers
// only the listed namespaces. While the refused one stays refused the
// watch stays open (issue 29: a relist per retry kept the reflector's
// back-off at its cap): at each check, a multiple of Recheck at least half
// of it away, a list of one object probes it. Once it answers, the watch
// ends at the next check (so the reflector relists and reads it); if
// every namespace is refused, the list fails.
func TestMultiNamespaceForbiddenNamespace(t *testing.T) {
	leaks(t)
	s := newNSServer()
	s.forbidden["b"] = true
	lw, told := newMulti(s)
	ctx := context.Background()
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list with one forbidden namespace: %v", err)
	}
	if got := listNames(t, obj); !slices.Equal(got, []string{"a/a1", "a/a2"}) {
		t.Fatalf("listed %v, want namespace a's objects", got)
	}
	if rv, _ := ListRV(obj); rv != "5" {
		t.Fatalf("rv %q, want a's", rv)
	}
	if len(*told) != 1 || len((*told)[0]) != 1 || !apierrors.IsForbidden((*told)[0]["b"]) {
		t.Fatalf("forbidden hook told %v, want b refused", *told)
	}
	if msg := ForbiddenError((*told)[0]).Error(); !strings.Contains(msg, "[b]") || !strings.Contains(msg, "refused") {
		t.Fatalf("message %q", msg)
	}
	start := time.Now()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	watched := slices.Clone(s.watched)
	s.mu.Unlock()
	if !slices.Equal(watched, []string{"a"}) {
		t.Fatalf("watched %v, want only the listed namespace", watched)
	}
	s.watchOf("a").Add(widget("a", "a3", "6"))
	if ev := mustNext(t, w); names([]watch.Event{ev})[0] != "ADDED:a3" {
		t.Fatalf("event %v", ev)
	}
	probes := func() (n int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, o := range s.listOpts {
			if o.Limit == 1 {
				n++
				if o.LabelSelector != "app=x" {
					t.Errorf("probe %+v without the selector", o)
				}
			}
		}
		return n
	}
	// Four periods refused: probes, the watch still open.
	time.Sleep(4 * lw.Recheck)
	select {
	case ev, ok := <-w.ResultChan():
		t.Fatalf("merged watch gave %v (open %v) while the refused namespace is still refused", ev, ok)
	default:
	}
	if n := probes(); n < 2 || n > 5 {
		t.Fatalf("%d probes of the refused namespace in %v, want one per check (%v)", n, 4*lw.Recheck, lw.Recheck)
	}
	// The namespace is allowed again: the watch ends at the next check,
	// the relist reads both and says so.
	s.mu.Lock()
	s.forbidden["b"] = false
	s.mu.Unlock()
	allowed := time.Now()
	drain(t, w)
	if took := time.Since(allowed); took > 3*lw.Recheck {
		t.Fatalf("merged watch ended %v after the refused namespace became readable, want within one period (and slack)", took)
	}
	if took := time.Since(start); took < 4*lw.Recheck {
		t.Fatalf("merged watch ended after %v", took)
	}
	obj, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || len(listNames(t, obj)) != 3 || len((*told)[1]) != 0 {
		t.Fatalf("relist: %v, told %v", err, *told)
	}
	// Every namespace refused: the list fails with the first one's error.
	s.mu.Lock()
	s.forbidden["a"], s.forbidden["b"] = true, true
	s.mu.Unlock()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "namespace a") {
		t.Fatalf("all forbidden: %v, want namespace a's 403", err)
	}
}

// Errors other than 403 fail the list; a failed namespace watch stops the
// ones already opened.
func TestMultiNamespaceErrors(t *testing.T) {
	leaks(t)
	s := newNSServer()
	lw, _ := newMulti(s)
	ctx := context.Background()
	boom := apierrors.NewInternalError(errors.New("boom"))
	lw.Funcs.List = func(context.Context, string, metav1.ListOptions) (runtime.Object, error) { return nil, boom }
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("list err %v", err)
	}
	lw.Funcs = s.funcs()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.watchErr = boom
	s.mu.Unlock()
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"}); !apierrors.IsInternalError(err) {
		t.Fatalf("watch err %v", err)
	}
	if !s.watchOf("a").IsStopped() {
		t.Fatal("namespace a's watch left open after b's failed")
	}
	// The failed open is not resumed again: the next watch relists.
	s.mu.Lock()
	s.watchErr = nil
	s.mu.Unlock()
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after a failed open: %v, want expired", err)
	}
}

// A namespace's watch request that is not answered within WatchOpenBound
// (a server whose watch cache cannot initialize answers 429, which
// client-go retries inside the request for minutes) is cancelled: the
// watch answers "expired" at once, so the reflector relists (a consistent
// list fails with the server's real error), and the next watch relists
// too. Found by test/cachetest's TestCorruptObjectInStorage once merged
// watches resumed.
func TestMultiNamespaceUnansweredWatchRelists(t *testing.T) {
	leaks(t)
	defer func(b time.Duration) { WatchOpenBound = b }(WatchOpenBound)
	WatchOpenBound = 100 * time.Millisecond
	s := newNSServer()
	lw, _ := newMulti(s)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := lw.Funcs.Watch
	var cancelled atomic.Bool
	lw.Funcs.Watch = func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
		if ns == "b" {
			<-ctx.Done() // retried inside the request until cancelled
			cancelled.Store(true)
			return nil, ctx.Err()
		}
		return plain(ctx, ns, o)
	}
	start := time.Now()
	_, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), `namespace "b"`) {
		t.Fatalf("unanswered watch of b: %v, want expired naming b", err)
	}
	if !cancelled.Load() || time.Since(start) > 10*time.Second {
		t.Fatalf("b's request cancelled %v after %v", cancelled.Load(), time.Since(start))
	}
	if !s.watchOf("a").IsStopped() {
		t.Fatal("namespace a's watch left open")
	}
	lw.Funcs.Watch = plain
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after an unanswered one: %v, want expired (relist)", err)
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatalf("watch after the relist: %v", err)
	}
	w.Stop()
	drain(t, w)
}

// Selectors set label and field selectors, then the tweak runs (and may
// override them); Single applies them to each request.
func TestSingleAndSelectors(t *testing.T) {
	leaks(t)
	var got []metav1.ListOptions
	var gotNS []string
	f := Funcs{
		List: func(_ context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			got, gotNS = append(got, o), append(gotNS, ns)
			return widgetList("3"), nil
		},
		Watch: func(_ context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			got, gotNS = append(got, o), append(gotNS, ns)
			return watch.NewEmptyWatch(), nil
		},
	}
	lw := &Single{Funcs: f, Namespace: "a", NoWatchList: true, Selectors: Selectors{Label: "app=x", Field: "metadata.name=n",
		Tweak: func(o *metav1.ListOptions) { o.FieldSelector += ",extra" }}}
	if _, err := lw.List(metav1.ListOptions{LabelSelector: "ignored"}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.Watch(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	for i, o := range got {
		if o.LabelSelector != "app=x" || o.FieldSelector != "metadata.name=n,extra" || gotNS[i] != "a" {
			t.Fatalf("request %d: ns %q opts %+v", i, gotNS[i], o)
		}
	}
	if !lw.IsWatchListSemanticsUnSupported() {
		t.Fatal("NoWatchList not reported")
	}
	var o metav1.ListOptions
	Selectors{}.Apply(&o)
	if o.LabelSelector != "" || o.FieldSelector != "" {
		t.Fatalf("empty selectors set %+v", o)
	}
}

func TestListBuilders(t *testing.T) {
	l, err := UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR })("7", []runtime.Object{widget("a", "w", "1")})
	if err != nil {
		t.Fatal(err)
	}
	ul := l.(*unstructured.UnstructuredList)
	if ul.GetResourceVersion() != "7" || len(ul.Items) != 1 || ul.GetAPIVersion() != "example.com/v1" {
		t.Fatalf("list %+v", ul)
	}
	m, err := MetadataLists("9", []runtime.Object{&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ml := m.(*metav1.PartialObjectMetadataList); ml.ResourceVersion != "9" || len(ml.Items) != 1 {
		t.Fatalf("metadata list %+v", ml)
	}
	if rv, err := ListRV(m); err != nil || rv != "9" {
		t.Fatalf("ListRV %q %v", rv, err)
	}
	if _, err := ListRV(&runtime.Unknown{}); err == nil {
		t.Fatal("ListRV of a non-list: no error")
	}
	bad := listBuilder(func() runtime.Object { return &runtime.Unknown{} })
	if _, err := bad("1", nil); err == nil {
		t.Fatal("a builder of a non-list type did not fail")
	}
}

// With Resolve, each list reads what it answers (denied namespaces are
// not listed and are told to the hook, with the next check); a merged
// watch asks it again every Recheck and ends when the answer changes, so
// the reflector relists; All lists and watches all namespaces at once;
// with AllowNone, no namespace is an empty list.
func TestMultiNamespaceResolve(t *testing.T) {
	leaks(t)
	s := newNSServer()
	s.objects[""] = append(slices.Clone(s.objects["a"]), s.objects["b"]...)
	s.rv[""] = "9"
	var mu sync.Mutex
	answer := NamespaceSet{Names: []string{"a"}, Denied: map[string]error{"b": errors.New("may not list b")}}
	resolves := 0
	var heard []Listed
	lw := &MultiNamespace{Funcs: s.funcs(), Lists: UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Resolve: func(context.Context) (NamespaceSet, error) {
			mu.Lock()
			defer mu.Unlock()
			resolves++
			return answer, nil
		},
		Hook:      func(l Listed) { mu.Lock(); heard = append(heard, l); mu.Unlock() },
		Recheck:   200 * time.Millisecond,
		AllowNone: true,
	}
	set := func(a NamespaceSet) { mu.Lock(); answer = a; mu.Unlock() }
	ctx := context.Background()
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || !slices.Equal(listNames(t, obj), []string{"a/a1", "a/a2"}) {
		t.Fatalf("list: %v %v", obj, err)
	}
	if l := heard[0]; !slices.Equal(l.Names, []string{"a"}) || l.Denied["b"] == nil || l.Next.IsZero() {
		t.Fatalf("hook told %+v", l)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	// The same answer: the watch runs on past a few re-checks.
	time.Sleep(700 * time.Millisecond)
	select {
	case _, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("merged watch ended with the answer unchanged")
		}
	default:
	}
	mu.Lock()
	checked := resolves
	mu.Unlock()
	if checked < 3 {
		t.Fatalf("%d resolves, want the list's and re-checks every 200 ms", checked)
	}
	set(NamespaceSet{All: true})
	start := time.Now()
	drain(t, w)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("merged watch ended %v after the answer changed", took)
	}
	obj, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || len(listNames(t, obj)) != 3 || !heard[1].All {
		t.Fatalf("relist over all namespaces: %v, told %+v", err, heard[1])
	}
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "9"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	watched := slices.Clone(s.watched)
	s.mu.Unlock()
	if !slices.Equal(watched, []string{"a", ""}) {
		t.Fatalf("watched %q, want a, then all namespaces at once", watched)
	}
	w.Stop()
	drain(t, w)
	set(NamespaceSet{Denied: map[string]error{"a": errors.New("no"), "b": errors.New("no")}})
	obj, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || len(listNames(t, obj)) != 0 {
		t.Fatalf("nothing permitted with AllowNone: %v, %v; want an empty list", obj, err)
	}
	lw.AllowNone = false
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("nothing permitted without AllowNone: no error")
	}
}

// PerNamespace stretches the re-check period with the namespaces
// checked.
func TestMultiNamespacePerNamespace(t *testing.T) {
	leaks(t)
	s := newNSServer()
	var next time.Time
	lw := &MultiNamespace{Funcs: s.funcs(), Lists: UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Resolve: func(context.Context) (NamespaceSet, error) {
			return NamespaceSet{Names: []string{"a", "b"}, Denied: map[string]error{"c": errors.New("no")}}, nil
		},
		Follow: true, Recheck: 10 * time.Millisecond, PerNamespace: time.Second,
		Next: func(t time.Time) { next = t },
	}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// The period is stretched to 1 s per namespace (a, b and c: 3 s); the
	// next check is its next multiple, at most one period away.
	const period = 3 * time.Second
	if until := time.Until(next); until <= 0 || until > period || next.Truncate(period) != next {
		t.Fatalf("next check %v, in %v; want the next multiple of the 3 s period (at most 3 s away)", next, until)
	}
}

// A 403 met while running re-checks at once, without a failure: a watch
// refused as it opens, or by an error event of a running watch, ends as
// "expired" (the reflector relists); the relist asks Resolve again and,
// while Resolve still permits the namespace, leaves it out as refused
// until the next check (one refused watch per check, no 403 loop). A list
// refused although Resolve permitted it asks Resolve once more at once.
func TestMultiNamespaceForbiddenWhileRunning(t *testing.T) {
	leaks(t)
	s := newNSServer()
	var mu sync.Mutex
	answer := NamespaceSet{Names: []string{"a", "b"}}
	resolves := 0
	var heard []Listed
	lw := &MultiNamespace{Funcs: s.funcs(), Lists: UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Resolve: func(context.Context) (NamespaceSet, error) {
			mu.Lock()
			defer mu.Unlock()
			resolves++
			return answer, nil
		},
		Hook:    func(l Listed) { mu.Lock(); heard = append(heard, l); mu.Unlock() },
		Follow:  true,
		Recheck: time.Hour,
	}
	resolved := func() int { mu.Lock(); defer mu.Unlock(); return resolves }
	last := func() Listed { mu.Lock(); defer mu.Unlock(); return heard[len(heard)-1] }
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A watch refused as it opens.
	forbidden := apierrors.NewForbidden(widgetsGVR.GroupResource(), "", errors.New("may not watch in b"))
	s.mu.Lock()
	s.watchErr = forbidden
	s.mu.Unlock()
	_, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), `namespace "b"`) {
		t.Fatalf("watch refused in b: %v, want expired naming b (the reflector relists without failing)", err)
	}
	if !s.watchOf("a").IsStopped() {
		t.Fatal("namespace a's watch left open after b's was refused")
	}
	before := resolved()
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || !slices.Equal(listNames(t, obj), []string{"a/a1", "a/a2"}) {
		t.Fatalf("relist after b's refused watch: %v %v, want a's objects only", listNames(t, obj), err)
	}
	if resolved() != before+1 {
		t.Fatalf("%d resolves for the relist, want 1 (the re-check)", resolved()-before)
	}
	// The next check is the next multiple of the period (an hour): within
	// one period, far from the few milliseconds this test takes (it could
	// only be wrong run across an exact hour).
	if l := last(); !apierrors.IsForbidden(l.Denied["b"]) || !l.Next.After(time.Now()) || time.Until(l.Next) > time.Hour || l.Next.Truncate(time.Hour) != l.Next {
		t.Fatalf("relist told %+v, want b refused until the next check (the next full hour)", l)
	}
	s.mu.Lock()
	lists := len(s.listOpts)
	s.watchErr = nil
	s.mu.Unlock()
	if lists != 3 {
		t.Fatalf("%d list requests, want 3 (a and b, then a alone: b not listed again before the next check)", lists)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	watched := slices.Clone(s.watched)
	s.mu.Unlock()
	if !slices.Equal(watched, []string{"a", "b", "a"}) {
		t.Fatalf("watched %v, want a and b, then a alone", watched)
	}
	w.Stop()
	drain(t, w)

	// The next list tries b again (the check came); then a running watch
	// is refused by an error event.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil || len(last().Denied) != 0 {
		t.Fatalf("list: %v, told %+v; want both namespaces", err, last())
	}
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatal(err)
	}
	st := forbidden.Status()
	s.watchOf("b").Error(&st)
	evs := drain(t, w)
	if len(evs) != 1 || evs[0].Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(evs[0].Object)) {
		t.Fatalf("events after b's 403 event: %v, want one expired error event", evs)
	}
	mu.Lock()
	answer = NamespaceSet{Names: []string{"a"}, Denied: map[string]error{"b": errors.New("may not list, watch widgets in b")}}
	mu.Unlock()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil || last().Denied["b"] == nil || apierrors.IsForbidden(last().Denied["b"]) {
		t.Fatalf("relist after the 403 event: %v, told %+v; want b denied by Resolve", err, last())
	}

	// A list refused although Resolve permitted it: Resolve asked again
	// at once; its reason is kept.
	mu.Lock()
	answer = NamespaceSet{Names: []string{"a", "b"}}
	mu.Unlock()
	s.mu.Lock()
	s.forbidden["b"] = true
	s.mu.Unlock()
	var again int
	lw.Resolve = func(context.Context) (NamespaceSet, error) {
		mu.Lock()
		defer mu.Unlock()
		again++
		if again == 1 {
			return answer, nil
		}
		return NamespaceSet{Names: []string{"a"}, Denied: map[string]error{"b": errors.New("may not list, watch widgets in b")}}, nil
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if l := last(); again != 2 || l.Denied["b"] == nil || apierrors.IsForbidden(l.Denied["b"]) {
		t.Fatalf("list refused in b: %d resolves, told %+v; want 2 and Resolve's reason", again, l)
	}
}

// When a check finds the same namespaces to list but other denials (a
// namespace denied was deleted, or one was created and denied), Hook is
// told at once, with the server's refusals kept, and the watch runs on:
// nothing held changed, so nothing is listed. Before, the deleted
// namespace stayed named until the next list.
func TestMultiNamespaceDenialsChanged(t *testing.T) {
	leaks(t)
	s := newNSServer()
	s.forbidden["b"] = true // Resolve permits b, the server refuses it
	var mu sync.Mutex
	answer := NamespaceSet{Names: []string{"a", "b"}, Denied: map[string]error{"c": errors.New("may not list c"), "d": errors.New("may not list d")}}
	var heard []Listed
	wake := make(chan struct{}, 1)
	resolve := func(context.Context) (NamespaceSet, error) {
		mu.Lock()
		defer mu.Unlock()
		return answer, nil
	}
	lw := &MultiNamespace{Funcs: s.funcs(), Lists: UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Resolve: resolve, Quick: resolve, Follow: true, Wake: wake,
		Hook:    func(l Listed) { mu.Lock(); heard = append(heard, l); mu.Unlock() },
		Recheck: time.Hour,
	}
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	told := func() []Listed { mu.Lock(); defer mu.Unlock(); return slices.Clone(heard) }
	if h := told(); len(h) != 1 || len(h[0].Denied) != 3 {
		t.Fatalf("list told %+v, want b (refused), c and d denied", h)
	}
	mu.Lock()
	answer = NamespaceSet{Names: []string{"a", "b"}, Denied: map[string]error{"c": errors.New("may not list c")}} // d deleted
	mu.Unlock()
	wake <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for len(told()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	h := told()
	if len(h) != 2 {
		t.Fatalf("Hook told %d times, want again once d was gone", len(h))
	}
	if d := h[1].Denied; len(d) != 2 || d["b"] == nil || d["c"] == nil || !slices.Equal(h[1].Names, []string{"a"}) {
		t.Fatalf("told %+v, want a listed, b (refused by the server) and c denied", h[1])
	}
	select {
	case _, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("merged watch ended; want it to run on (nothing held changed)")
		}
	case <-time.After(200 * time.Millisecond):
	}
	s.mu.Lock()
	lists := len(s.listOpts)
	s.mu.Unlock()
	if lists != 2 {
		t.Fatalf("%d lists, want the first (a and b) only", lists)
	}
	w.Stop()
	drain(t, w)
}

// With Switch, a changed answer and a 403 error event of a running watch
// call Switch instead of ending the merged watch (the stream switches
// inside itself); the next list uses the answer found, and leaves out the
// refused namespace. If nothing stops the watch within switchGrace, it
// ends by itself.
func TestMultiNamespaceSwitch(t *testing.T) {
	leaks(t)
	saved := switchGrace
	switchGrace = 300 * time.Millisecond
	t.Cleanup(func() { switchGrace = saved })
	s := newNSServer()
	var mu sync.Mutex
	answer := NamespaceSet{Names: []string{"a", "b"}}
	resolves := 0
	switches := make(chan struct{}, 4)
	lw := &MultiNamespace{Funcs: s.funcs(), Lists: UnstructuredLists(func() schema.GroupVersionResource { return widgetsGVR }),
		Resolve: func(context.Context) (NamespaceSet, error) {
			mu.Lock()
			defer mu.Unlock()
			resolves++
			return answer, nil
		},
		Follow: true, Recheck: 100 * time.Millisecond,
		Switch: func() { switches <- struct{}{} },
	}
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatal(err)
	}
	// A 403 error event on b's watch: Switch, no event, the watch open.
	status := apierrors.NewForbidden(widgetsGVR.GroupResource(), "", errors.New("may not watch in b")).Status()
	s.watchOf("b").Error(&status)
	select {
	case <-switches:
	case <-time.After(5 * time.Second):
		t.Fatal("no Switch after a 403 event")
	}
	select {
	case ev, ok := <-w.ResultChan():
		t.Fatalf("merged watch delivered %v (open %v) after Switch; want it open and quiet until stopped", ev, ok)
	case <-time.After(100 * time.Millisecond):
	}
	w.Stop() // the stream that switched stops it
	drain(t, w)
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || !slices.Equal(listNames(t, obj), []string{"a/a1", "a/a2"}) {
		t.Fatalf("the switch's list: %v %v, want a's objects only (b refused until the next check)", obj, err)
	}
	// A changed answer: Switch, and the list uses it without asking again.
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	answer = NamespaceSet{All: true}
	mu.Unlock()
	select {
	case <-switches:
	case <-time.After(5 * time.Second):
		t.Fatal("no Switch after the answer changed")
	}
	mu.Lock()
	before := resolves
	mu.Unlock()
	// Nobody stops it: it ends by itself after switchGrace.
	start := time.Now()
	drain(t, w)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("merged watch ended %v after Switch with nobody stopping it, want about %v", took, switchGrace)
	}
	s.objects[""] = append(slices.Clone(s.objects["a"]), s.objects["b"]...)
	s.rv[""] = "9"
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after := resolves
	mu.Unlock()
	if after != before {
		t.Fatalf("the switch's list asked Resolve %d times, want 0 (the answer found is used)", after-before)
	}
}

// TestNextCheckWithinOnePeriod: from any moment, the next namespace check
// is a multiple of the period (so informers re-check together) and at
// most one period away (so a grant made at any moment is checked within
// one period). Before, a multiple less than half a period away was
// skipped, and a grant made then waited up to 1.5 periods.
func TestNextCheckWithinOnePeriod(t *testing.T) {
	for _, period := range []time.Duration{100 * time.Millisecond, 2 * time.Second, 30 * time.Second, 100 * time.Second} {
		base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).Truncate(period)
		const steps = 64
		for i := 0; i <= steps; i++ {
			now := base.Add(period * time.Duration(i) / steps)
			next := nextCheck(now, period)
			if gap := next.Sub(now); gap <= 0 || gap > period {
				t.Fatalf("period %v, now %v past a multiple: next check in %v, want more than 0 and at most one period", period, now.Sub(base), gap)
			}
			if next.Truncate(period) != next {
				t.Fatalf("period %v: next check %v is not a multiple of the period", period, next)
			}
			// Every moment of the same interval gives the same check.
			if i < steps {
				if other := nextCheck(base.Add(period-1), period); other != next {
					t.Fatalf("period %v: %v and %v in one interval check at %v and %v", period, now.Sub(base), period-1, next, other)
				}
			}
		}
	}
}
