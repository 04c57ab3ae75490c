package reflectorseam

import (
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// The contract tests of the Reflector behaviours listed in reflector.go's
// package doc, one test per behaviour, numbered as there. Each drives
// client-go's real Reflector (or SharedIndexInformer, whose reflector and
// RealFIFO are client-go's) against a script the test answers request by
// request.

// Behaviour 1. client-go v0.37 reflector.go (*Reflector).watch returns an
// error of WatchWithContext that is not retriable (isWatchErrorRetriable);
// (*Reflector).RunWithContext hands it to the watch error handler and runs
// ListAndWatch again after r.delayHandler (the backoff); list() asks
// relistResourceVersion, the last synced one (an expired watch does not set
// isLastSyncResourceVersionUnavailable).
func TestReflectorRelistsAfterBackoffOnExpiredFromWatch(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	if r := s.next(t, "list", "the first list"); r.opts.ResourceVersion != "0" {
		t.Fatalf("first list asks resourceVersion %q, want \"0\" (relistResourceVersion with nothing synced)", r.opts.ResourceVersion)
	} else {
		r.list(widgetList("10", widget("w1", "5")))
	}
	w := s.next(t, "watch", "a watch from the list")
	if w.opts.ResourceVersion != "10" {
		t.Fatalf("watch asks resourceVersion %q, want the list's \"10\"", w.opts.ResourceVersion)
	}
	answered := time.Now()
	w.fail(Expired("test"))
	r := s.next(t, "list", "an error from Watch makes the reflector relist")
	if got := r.gap(answered); got < informerBackoffFloor {
		t.Errorf("relist %v after Watch failed, want at least the backoff (%v): it no longer waits its backoff", got, informerBackoffFloor)
	}
	if r.opts.ResourceVersion != "10" {
		t.Errorf("relist asks resourceVersion %q, want the last synced \"10\"", r.opts.ResourceVersion)
	}
	errs := inf.handlerErrors()
	if len(errs) != 1 || !IsExpired(errs[0]) {
		t.Fatalf("watch error handler told %v, want the Expired error once", errs)
	}
	r.list(widgetList("11"))
}

// Behaviour 2. client-go v0.37 reflector.go handleAnyWatch returns
// apierrors.FromObject of an Error event; (*Reflector).watch logs an
// isExpiredError at V(4) and returns nil, so RunWithContext does not call
// the watch error handler and runs ListAndWatch again after the backoff.
func TestReflectorRelistsAfterBackoffOnExpiredEvent(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	s.next(t, "list", "the first list").list(widgetList("10", widget("w1", "5")))
	w := s.next(t, "watch", "a watch from the list").watch()
	answered := time.Now()
	w.Action(ExpiredEvent("test").Type, ExpiredEvent("test").Object)
	r := s.next(t, "list", "an Expired error event makes the reflector relist")
	if got := r.gap(answered); got < informerBackoffFloor {
		t.Errorf("relist %v after the Expired event, want at least the backoff (%v)", got, informerBackoffFloor)
	}
	if r.opts.ResourceVersion != "10" {
		t.Errorf("relist asks resourceVersion %q, want the last synced \"10\"", r.opts.ResourceVersion)
	}
	if errs := inf.handlerErrors(); len(errs) != 0 {
		t.Fatalf("watch error handler told %v, want nothing (an expired watch is not a failure)", errs)
	}
	r.list(widgetList("11"))
}

// Behaviour 3. client-go v0.37 reflector.go (*Reflector).watch loops when
// handleWatch returns nil (the result channel closed after events) and
// calls WatchWithContext again from LastSyncResourceVersion, without a list
// and without r.delayHandler.
func TestReflectorRewatchesAtOnceWhenWatchEnds(t *testing.T) {
	s := newScript(true)
	_, store := runReflector(t, s, noBackoff)
	s.next(t, "list", "the first list").list(widgetList("10", widget("w1", "5")))
	w := s.next(t, "watch", "a watch from the list").watch()
	w.Delete(widget("w1", "11"))
	w.Stop()
	r := s.next(t, "watch", "a watch that ends after events is watched again at once (the backoff is an hour)")
	if r.opts.ResourceVersion != "11" {
		t.Errorf("rewatch asks resourceVersion %q, want the last event's \"11\"", r.opts.ResourceVersion)
	}
	if keys := store.ListKeys(); len(keys) != 0 {
		t.Errorf("store holds %v after the delete, want nothing", keys)
	}
}

// Behaviour 4. client-go v0.37 reflector.go handleAnyWatch returns a
// VeryShortWatchError for a watch that closed within a second with no
// event; (*Reflector).watch logs it and returns nil: no handler, a relist
// after the backoff.
func TestReflectorRelistsAfterVeryShortEmptyWatch(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	s.next(t, "list", "the first list").list(widgetList("10"))
	wr := s.next(t, "watch", "a watch from the list")
	w := wr.watch()
	w.Stop()
	answered := time.Now()
	if took := answered.Sub(wr.at); took > 500*time.Millisecond {
		t.Fatalf("the test took %v to close the watch; it must close within a second of the request", took)
	}
	r := s.next(t, "list", "a watch closed at once with no event makes the reflector relist")
	if got := r.gap(answered); got < informerBackoffFloor {
		t.Errorf("relist %v after the empty watch, want at least the backoff (%v)", got, informerBackoffFloor)
	}
	if errs := inf.handlerErrors(); len(errs) != 0 {
		t.Errorf("watch error handler told %v, want nothing", errs)
	}
	r.list(widgetList("11"))
}

// Behaviour 5. client-go v0.37 reflector.go (*Reflector).watchList sends
// WatchWithContext with SendInitialEvents=true, ResourceVersionMatch
// NotOlderThan and rewatchResourceVersion; an error neither
// isWatchErrorRetriable nor isExpiredError is returned to
// (*Reflector).ListAndWatchWithContext, which logs it at V(4), sets
// fallbackToList and calls list() at once, then watches from the list.
func TestReflectorFallsBackToListOnWatchListError(t *testing.T) {
	watchList(t, true)
	for _, fallback := range []error{ErrNotServedFallback, ErrRelistFallback, ErrProbeFallback, ErrWatchListDeclined, ErrNotReadyFallback} {
		t.Run(fallback.Error(), func(t *testing.T) {
			if !IsWatchListFallback(fallback) || IsExpired(fallback) {
				t.Fatalf("%v: IsWatchListFallback %v, IsExpired %v", fallback, IsWatchListFallback(fallback), IsExpired(fallback))
			}
			s := newScript(false)
			_, store := runReflector(t, s, noBackoff)
			wl := s.next(t, "watch-list", "with WatchListClient on, ListAndWatch streams the list first")
			if o := wl.opts; o.ResourceVersion != "" || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !o.AllowWatchBookmarks {
				t.Fatalf("watch-list asks %s, want resourceVersion \"\", match NotOlderThan, bookmarks", describe(o))
			}
			wl.fail(fallback)
			l := s.next(t, "list", "a fallback error makes the reflector list at once (the backoff is an hour)")
			if l.opts.ResourceVersion != "0" {
				t.Errorf("fallback list asks resourceVersion %q, want \"0\"", l.opts.ResourceVersion)
			}
			l.list(widgetList("10", widget("w1", "5")))
			if w := s.next(t, "watch", "after the fallback list, a plain watch"); w.opts.ResourceVersion != "10" {
				t.Errorf("watch asks resourceVersion %q, want the list's \"10\"", w.opts.ResourceVersion)
			}
			if keys := store.ListKeys(); !slices.Equal(keys, []string{"a/w1"}) {
				t.Errorf("store holds %v, want the listed a/w1", keys)
			}
		})
	}
}

// Behaviour 5, the next relist. client-go v0.37 reflector.go
// (*Reflector).ListAndWatchWithContext tries watchList on every call while
// r.useWatchList (a fallback does not turn it off), from
// rewatchResourceVersion; a fallback is not told to the watch error
// handler.
func TestReflectorTriesWatchListOnEveryRelist(t *testing.T) {
	watchList(t, true)
	s := newScript(false)
	inf := runInformer(t, s)
	s.next(t, "watch-list", "the first ListAndWatch streams").fail(ErrRelistFallback)
	s.next(t, "list", "the fallback list").list(widgetList("10", widget("w1", "5")))
	w := s.next(t, "watch", "a watch from the list").watch()
	w.Action(ExpiredEvent("test").Type, ExpiredEvent("test").Object)
	wl := s.next(t, "watch-list", "the relist streams again")
	if wl.opts.ResourceVersion != "10" {
		t.Errorf("watch-list of the relist asks resourceVersion %q, want the last synced \"10\"", wl.opts.ResourceVersion)
	}
	if errs := inf.handlerErrors(); len(errs) != 0 {
		t.Errorf("watch error handler told %v, want nothing (a fallback is not a failure)", errs)
	}
	wl.fail(ErrRelistFallback)
	s.next(t, "list", "the fallback list of the relist").list(widgetList("11", widget("w1", "5")))
	s.next(t, "watch", "a watch from it")
}

// Behaviour 6. client-go v0.37 reflector.go (*Reflector).watchList, its
// isErrorRetriableWithSideEffectsFn: an isExpiredError from
// WatchWithContext or from the stream sets
// isLastSyncResourceVersionUnavailable and streams again (rewatchResourceVersion
// ""), with no fallback to a list.
func TestReflectorRetriesWatchListOnExpired(t *testing.T) {
	watchList(t, true)
	s := newScript(false)
	runReflector(t, s, noBackoff)
	s.next(t, "watch-list", "the first ListAndWatch streams").fail(Expired("test"))
	w := s.next(t, "watch-list", "an Expired answer to a watch-list request is streamed again, not listed").watch()
	w.Add(widget("w1", "5"))
	w.Action(ExpiredEvent("test").Type, ExpiredEvent("test").Object)
	r := s.next(t, "watch-list", "an Expired event before the initial events end is streamed again, not listed")
	if r.opts.ResourceVersion != "" {
		t.Errorf("watch-list after Expired asks resourceVersion %q, want \"\"", r.opts.ResourceVersion)
	}
	r.fail(ErrNotServedFallback)
	s.next(t, "list", "the fallback")
}

// Behaviour 7. client-go v0.37 reflector.go NewReflectorWithOptions turns
// r.useWatchList off when util/watchlist DoesClientNotSupportWatchListSemantics
// (the ListerWatcher's IsWatchListSemanticsUnSupported) says so; a
// SharedIndexInformer hands its ListerWatcher to the reflector unwrapped.
func TestReflectorSkipsWatchListWhenUnsupported(t *testing.T) {
	watchList(t, true)
	t.Run("reflector", func(t *testing.T) {
		s := newScript(true)
		runReflector(t, s, noBackoff)
		s.next(t, "list", "a ListerWatcher that cannot stream is listed").list(widgetList("10"))
		s.next(t, "watch", "then watched")
	})
	t.Run("informer", func(t *testing.T) {
		s := newScript(true)
		runInformer(t, s)
		s.next(t, "list", "a SharedIndexInformer's ListerWatcher that cannot stream is listed").list(widgetList("10"))
		s.next(t, "watch", "then watched")
	})
}

// Behaviour 8. client-go v0.37 reflector.go (*Reflector).watchList
// collects the stream's events in a temporary store until handleAnyWatch
// sees a bookmark annotated metav1.InitialEventsAnnotationKey, then calls
// r.store.Replace with them at that bookmark's resourceVersion and keeps
// the stream as the watch of (*Reflector).watch.
func TestReflectorEndsInitialEventsAtAnnotatedBookmark(t *testing.T) {
	watchList(t, true)
	s := newScript(false)
	inf := runInformer(t, s)
	w := s.next(t, "watch-list", "the first ListAndWatch streams").watch()
	w.Add(widget("w1", "5"))
	w.Add(widget("w2", "6"))
	w.Action(watch.Bookmark, bookmark("7", false))
	if EndsInitialEvents(bookmark("7", false)) || !EndsInitialEvents(bookmark("8", true)) {
		t.Fatal("EndsInitialEvents does not tell the annotated bookmark")
	}
	w.Action(watch.Bookmark, bookmark("8", true))
	var initial []string
	for range 2 {
		ev := inf.nextEvent(t, "the initial events reach the handlers at the annotated bookmark")
		if ev.verb != "add" || !ev.inInitial {
			t.Fatalf("handler got %s (in initial list %v) of %s, want an add in the initial list (one Replace)", ev.verb, ev.inInitial, key(ev.obj))
		}
		initial = append(initial, key(ev.obj))
	}
	sort.Strings(initial)
	if !slices.Equal(initial, []string{"a/w1", "a/w2"}) {
		t.Errorf("initial adds %v, want a/w1 a/w2", initial)
	}
	eventually(t, "the informer is synced after the annotated bookmark", inf.HasSynced)
	eventually(t, "LastSyncResourceVersion is the annotated bookmark's \"8\"", func() bool { return inf.LastSyncResourceVersion() == "8" })
	w.Modify(widget("w1", "9"))
	if ev := inf.nextEvent(t, "the stream goes on as the watch"); ev.verb != "update" || key(ev.obj) != "a/w1" {
		t.Fatalf("handler got %s of %s, want the update of a/w1 on the same stream", ev.verb, key(ev.obj))
	}
	w.Stop()
	if r := s.next(t, "watch", "once the stream ends, a plain watch"); r.opts.ResourceVersion != "9" {
		t.Errorf("watch asks resourceVersion %q, want \"9\"", r.opts.ResourceVersion)
	}
}

// Behaviour 9. client-go v0.37 reflector.go (*Reflector).watch asks
// AllowWatchBookmarks and LastSyncResourceVersion; handleAnyWatch sets the
// last synced resourceVersion from every event (propagateRVFromStart when
// the watch started from one), bookmarks included.
func TestReflectorTakesResourceVersionFromBookmark(t *testing.T) {
	s := newScript(true)
	r, store := runReflector(t, s, noBackoff)
	s.next(t, "list", "the first list").list(widgetList("10"))
	wr := s.next(t, "watch", "a watch from the list")
	if !wr.opts.AllowWatchBookmarks {
		t.Error("watch does not ask for bookmarks")
	}
	w := wr.watch()
	w.Add(widget("w1", "12"))
	w.Action(watch.Bookmark, bookmark("15", false))
	w.Stop()
	if next := s.next(t, "watch", "rewatch"); next.opts.ResourceVersion != "15" {
		t.Errorf("rewatch asks resourceVersion %q, want the bookmark's \"15\"", next.opts.ResourceVersion)
	}
	if rv := r.LastSyncResourceVersion(); rv != "15" {
		t.Errorf("LastSyncResourceVersion %q, want the bookmark's \"15\"", rv)
	}
	if keys := store.ListKeys(); !slices.Equal(keys, []string{"a/w1"}) {
		t.Errorf("store holds %v, want a/w1 (a bookmark adds nothing)", keys)
	}
}

// Behaviour 10. client-go v0.37 reflector.go (*Reflector).list and
// handleAnyWatch store the list's or event's resourceVersion as it is
// (setLastSyncResourceVersion, no comparison); (*Reflector).watch asks
// from it.
func TestReflectorAcceptsSyntheticResourceVersion(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	s.next(t, "list", "the first list").list(widgetList("10", widget("w1", "5")))
	if ev := inf.nextEvent(t, "the listed object"); ev.verb != "add" {
		t.Fatalf("handler got %s, want the add of a/w1", ev.verb)
	}
	w := s.next(t, "watch", "a watch from the list").watch()
	w.Action(ExpiredEvent("test").Type, ExpiredEvent("test").Object)
	s.next(t, "list", "the relist").list(widgetList(SyntheticRV))
	if ev := inf.nextEvent(t, "the empty list deletes a/w1"); ev.verb != "delete" || key(ev.obj) != "a/w1" {
		t.Fatalf("handler got %s of %s, want the delete of a/w1", ev.verb, key(ev.obj))
	}
	wr := s.next(t, "watch", "a watch from the synthetic list")
	if wr.opts.ResourceVersion != SyntheticRV {
		t.Errorf("watch asks resourceVersion %q, want the synthetic %q", wr.opts.ResourceVersion, SyntheticRV)
	}
	if rv := inf.LastSyncResourceVersion(); rv != SyntheticRV {
		t.Errorf("LastSyncResourceVersion %q, want the synthetic %q", rv, SyntheticRV)
	}
	// The removal inside a stream: deletes, then a bookmark at SyntheticRV
	// after a real resourceVersion.
	w = wr.watch()
	w.Add(widget("w2", "20"))
	w.Delete(widget("w2", "20"))
	w.Action(watch.Bookmark, bookmark(SyntheticRV, false))
	w.Stop()
	if r := s.next(t, "watch", "rewatch after the removal stream"); r.opts.ResourceVersion != SyntheticRV {
		t.Errorf("rewatch asks resourceVersion %q, want the synthetic %q", r.opts.ResourceVersion, SyntheticRV)
	}
	if rv := inf.LastSyncResourceVersion(); rv != SyntheticRV {
		t.Errorf("LastSyncResourceVersion %q after a bookmark at the synthetic one, want %q", rv, SyntheticRV)
	}
}

// Behaviour 11. client-go v0.37 the_real_fifo.go (*RealFIFO).Replace
// (one ReplacedAll with AtomicFIFO, else reconcileReplacement) and
// controller.go processReplacedAllInfo: a key of the indexer the new list
// lacks is deleted with a DeletedFinalStateUnknown holding the cached
// object.
func TestReflectorReplaceDeletesMissingObjects(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	s.next(t, "list", "the first list").list(widgetList("10", widget("w1", "5"), widget("w2", "6")))
	for range 2 {
		inf.nextEvent(t, "the listed objects")
	}
	w := s.next(t, "watch", "a watch from the list").watch()
	w.Action(ExpiredEvent("test").Type, ExpiredEvent("test").Object)
	s.next(t, "list", "the relist").list(widgetList("12", widget("w2", "6")))
	ev := inf.nextEvent(t, "the relist lacks a/w1")
	tomb, ok := ev.obj.(toolscache.DeletedFinalStateUnknown)
	if ev.verb != "delete" || !ok {
		t.Fatalf("handler got %s of %T, want a delete of a DeletedFinalStateUnknown", ev.verb, ev.obj)
	}
	if u, _ := tomb.Obj.(*unstructured.Unstructured); tomb.Key != "a/w1" || u == nil || u.GetResourceVersion() != "5" {
		t.Errorf("tombstone %q holds %v, want a/w1 at its cached resourceVersion 5", tomb.Key, tomb.Obj)
	}
	if ev := inf.nextEvent(t, "the relist keeps a/w2"); ev.verb != "update" || key(ev.obj) != "a/w2" {
		t.Errorf("handler got %s of %s, want the resync update of a/w2", ev.verb, key(ev.obj))
	}
	eventually(t, "the store holds a/w2 only", func() bool { return slices.Equal(inf.GetStore().ListKeys(), []string{"a/w2"}) })
}

// Behaviour 12. client-go v0.37 reflector.go handleAnyWatch drops (and
// logs) an event whose object's type is not the reflector's expectedType.
func TestReflectorDropsEventsOfAnotherType(t *testing.T) {
	s := newScript(true)
	_, store := runReflector(t, s, noBackoff)
	s.next(t, "list", "the first list").list(widgetList("10"))
	w := s.next(t, "watch", "a watch from the list").watch()
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", ResourceVersion: "11"}}
	other.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	w.Add(other)
	w.Add(widget("w2", "12"))
	w.Stop()
	s.next(t, "watch", "rewatch (all events handled)")
	if keys := store.ListKeys(); !slices.Equal(keys, []string{"a/w2"}) {
		t.Errorf("store holds %v, want only a/w2 (the PartialObjectMetadata dropped)", keys)
	}
}

// Behaviour 13. client-go v0.37 reflector.go (*Reflector).list returns
// fmt.Errorf("failed to list %v: %w", ...) of the list's error, which
// RunWithContext hands to the watch error handler.
func TestReflectorWrapsListErrorForHandler(t *testing.T) {
	s := newScript(true)
	inf := runInformer(t, s)
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "")
	s.next(t, "list", "the first list").fail(notFound)
	s.next(t, "list", "the list again after the backoff").list(widgetList("10"))
	errs := inf.handlerErrors()
	if len(errs) != 1 || !errors.Is(errs[0], notFound) || !apierrors.IsNotFound(errs[0]) {
		t.Fatalf("watch error handler told %v, want the list's NotFound, wrapped", errs)
	}
}
