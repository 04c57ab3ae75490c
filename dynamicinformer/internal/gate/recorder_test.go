package gate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// recLog is a Recorder that writes down its calls: "begin", "page:NAMES"
// (" end@RV" on the last page), "ended@RV", "observe EVENT" and, once
// the reader took it, "taken EVENT".
type recLog struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (r *recLog) add(c string) { r.mu.Lock(); r.calls = append(r.calls, c); r.mu.Unlock() }

func (r *recLog) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func (r *recLog) ListBegun() { r.add("begin") }

func (r *recLog) ListPage(list runtime.Object, end bool, rv string) {
	var names []string
	items, _ := meta.ExtractList(list)
	for _, it := range items {
		m, _ := meta.Accessor(it)
		names = append(names, m.GetName())
	}
	c := "page:" + strings.Join(names, ",")
	if end {
		c += " end@" + rv
	}
	r.add(c)
}

func (r *recLog) ListEnded(rv string) { r.add("ended@" + rv) }

func (r *recLog) Observe(ev watch.Event) func() {
	d := summary([]watch.Event{ev})[0]
	if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
		d += " (initial events end)"
	}
	r.add("observe " + d)
	return func() { r.add("taken " + d) }
}

// waitCalls waits until the recorder's calls are want (taking them), or
// fails after a few seconds with what came.
func waitCalls(t *testing.T, r *recLog, want ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		got = append(got, r.take()...)
		if len(got) >= len(want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorder calls\n got %q\nwant %q", got, want)
	}
}

// A paged list is one ListBegun, a ListPage per page with the last one
// ending it at the list's resourceVersion; a watch event is observed
// before it is offered and taken only once the reader read it.
func TestRecorderListPagesAndEvents(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	rec := &recLog{}
	f.lw.Journal = rec
	f.inner.set(func(s *stubLW) {
		s.items = []*unstructured.Unstructured{widget("w1", "5"), widget("w2", "6"), widget("w3", "7")}
		s.pageSize = 2
	})
	ctx := context.Background()
	l, err := f.lw.ListWithContext(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := meta.ListAccessor(l)
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{Limit: 2, Continue: lm.GetContinue()}); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, "begin", "page:w1,w2", "page:w3 end@10")

	w, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, server := f.inner.lastWatch()
	server.Add(widget("w4", "11"))
	waitCalls(t, rec, "observe ADDED:w4@11")
	time.Sleep(50 * time.Millisecond)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("before the reader read the event: %q", got)
	}
	drain(t, w, 1)
	waitCalls(t, rec, "taken ADDED:w4@11")
	bm := widget("", "12")
	server.Action(watch.Bookmark, bm)
	server.Delete(widget("w1", "13"))
	drain(t, w, 2)
	waitCalls(t, rec, "observe BOOKMARK:@12", "taken BOOKMARK:@12", "observe DELETED:w1@13", "taken DELETED:w1@13")

	// An event the reader never takes (it stops the watch) is observed,
	// never taken.
	server.Modify(widget("w2", "14"))
	waitCalls(t, rec, "observe MODIFIED:w2@14")
	w.Stop()
	drain(t, w, -1)
	time.Sleep(50 * time.Millisecond)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("after the reader stopped: %q", got)
	}
}

// A list the gate makes up for a resource no longer served (empty, at
// no resourceVersion) is a list like another: begun, one page, ended.
func TestRecorderEmptiedList(t *testing.T) {
	f := newFixture(t, true, 0)
	rec := &recLog{}
	f.lw.Journal = rec
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.lw.Relist()
	f.lw.SetServed(false, "gone", true)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, "begin", "page:w1 end@10", "begin", "page: end@")
}

// A watch-list stream is begun before its request; its initial events,
// the bookmark that ends them included, are observed and taken like any
// event (the Recorder reads the end from the bookmark's annotation).
func TestRecorderWatchList(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	rec := &recLog{}
	f.lw.Journal = rec
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: truePtr(), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, "begin")
	_, server := f.inner.lastWatch()
	server.Add(widget("w1", "5"))
	end := widget("", "10")
	end.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	server.Action(watch.Bookmark, end)
	drain(t, w, 2)
	waitCalls(t, rec, "observe ADDED:w1@5", "taken ADDED:w1@5",
		"observe BOOKMARK:@10 (initial events end)", "taken BOOKMARK:@10 (initial events end)")
	w.Stop()
	drain(t, w, -1)
}

// A removal is the deletes of the cached objects and the gate's made-up
// bookmark, observed and taken; the refill after it is begun before its
// list, delivers the listed objects and the deletes of cached objects
// the list lacks as events, and is ended at the list's resourceVersion
// only once its bookmark was taken, before the server's next event.
func TestRecorderRemovalAndRefill(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	rec := &recLog{}
	f.lw.Journal = rec
	w := listAndWatch(t, f.lw)
	f.lw.SetServed(false, "CRD deleted", true)
	drain(t, w, -1)
	waitCalls(t, rec, "begin", "page:w1 end@10",
		"observe DELETED:w1@5", "taken DELETED:w1@5",
		"observe BOOKMARK:@"+SyntheticRV, "taken BOOKMARK:@"+SyntheticRV)

	// An add in flight during the removal: the cache holds w9, the
	// server does not.
	f.cache.set(widget("w9", "8"))
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV, AllowWatchBookmarks: true})
	f.lw.SetServed(true, "", true)
	r := returned(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	waitCalls(t, rec, "begin", "observe ADDED:w1@5")
	drain(t, r.w, 2)
	waitCalls(t, rec, "taken ADDED:w1@5", "observe DELETED:w9@8", "taken DELETED:w9@8", "observe BOOKMARK:@10")
	drain(t, r.w, 1)
	waitCalls(t, rec, "taken BOOKMARK:@10", "ended@10")
	_, server := f.inner.lastWatch()
	server.Add(widget("w2", "11"))
	drain(t, r.w, 1)
	waitCalls(t, rec, "observe ADDED:w2@11", "taken ADDED:w2@11")
	r.w.Stop()
	drain(t, r.w, -1)
}
