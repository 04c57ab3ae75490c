// Package reflectorseam is the one place where informerkit steers
// client-go's Reflector with answers it makes up, and the list of the
// Reflector behaviours those answers rely on.
//
// informerkit keeps one client-go informer per resource through removals,
// relists, shard switches and silent servers. It does so without forking
// the Reflector: its ListerWatcher (packages gate and listwatch) answers
// the Reflector's requests so that the Reflector's own paths do what is
// needed. Every such answer is built here; the rest of the module calls
// these functions and never builds an "expired" status, a watch-list
// fallback or a synthetic resourceVersion itself.
//
// # Behaviours relied on
//
// Each is pinned by a contract test in this package that drives client-go's
// real Reflector (or SharedIndexInformer) against a scripted
// ListerWatcher; a client-go upgrade that changes one fails the test named
// here. Locations are client-go v0.37, k8s.io/client-go/tools/cache.
//
//  1. An error returned by Watch goes to the watch error handler, then the
//     Reflector relists after its backoff (at least 800 ms), asking the
//     last synced resourceVersion. [Expired] from Watch relies on it.
//     TestReflectorRelistsAfterBackoffOnExpiredFromWatch;
//     reflector.go (*Reflector).watch, (*Reflector).RunWithContext.
//  2. A watch Error event carrying 410 Expired ends the watch quietly
//     (logged at V(4), the error handler is not told), then the Reflector
//     relists after its backoff, asking the last synced resourceVersion.
//     [ExpiredEvent] relies on it.
//     TestReflectorRelistsAfterBackoffOnExpiredEvent;
//     reflector.go handleAnyWatch, (*Reflector).watch (isExpiredError).
//  3. A watch whose result channel closes after at least one event is
//     watched again at once (no list, no backoff), from the last synced
//     resourceVersion. The gate's removal and refill streams rely on it.
//     TestReflectorRewatchesAtOnceWhenWatchEnds; reflector.go (*Reflector).watch.
//  4. A watch that closes within a second with no event is a
//     VeryShortWatchError: logged, then a relist after the backoff. So
//     every stream the gate makes up ends with at least a bookmark.
//     TestReflectorRelistsAfterVeryShortEmptyWatch; reflector.go handleAnyWatch.
//  5. With watch-list on (client-go's WatchListClient feature, on by
//     default), each ListAndWatch first sends a watch with
//     SendInitialEvents=true ([WatchListRequested]); any error that is
//     neither 410 Expired nor retriable (429, connection refused) makes it
//     fall back to a plain list in the same ListAndWatch (no backoff, the
//     error handler is not told), then to a plain watch from the list's
//     resourceVersion. The next relist tries watch-list again. The
//     fallback errors ([IsWatchListFallback]) rely on it.
//     TestReflectorFallsBackToListOnWatchListError,
//     TestReflectorTriesWatchListOnEveryRelist;
//     reflector.go (*Reflector).ListAndWatchWithContext, (*Reflector).watchList.
//  6. A watch-list request answered 410 Expired (by Watch or by an Error
//     event before the initial events end) is sent again as a watch-list
//     from resourceVersion "": no fallback. So the fallback errors must
//     not be API statuses.
//     TestReflectorRetriesWatchListOnExpired; reflector.go (*Reflector).watchList.
//  7. A ListerWatcher whose IsWatchListSemanticsUnSupported returns true
//     is only listed and watched, never asked to stream a list (through
//     SharedIndexInformer too). MultiNamespace and clients that cannot
//     stream rely on it.
//     TestReflectorSkipsWatchListWhenUnsupported;
//     reflector.go NewReflectorWithOptions, util/watchlist DoesClientNotSupportWatchListSemantics.
//  8. A watch-list stream's initial events are collected apart and become
//     the store's content (one Replace, handlers told isInInitialList) at
//     the bookmark annotated metav1.InitialEventsAnnotationKey
//     ([EndsInitialEvents]); a bookmark without it does not end them. The
//     same stream then goes on as the watch.
//     TestReflectorEndsInitialEventsAtAnnotatedBookmark;
//     reflector.go (*Reflector).watchList, handleAnyWatch.
//  9. Every watch asks for bookmarks; a bookmark sets the last synced
//     resourceVersion (LastSyncResourceVersion) to its own, as does every
//     event of a watch started from a resourceVersion; the next watch
//     asks from it.
//     TestReflectorTakesResourceVersionFromBookmark;
//     reflector.go (*Reflector).watch, handleAnyWatch, (*Reflector).LastSyncResourceVersion.
//  10. resourceVersions are opaque: a list or bookmark at [SyntheticRV]
//     after "10" is taken as it is (no ordering check), reported by
//     LastSyncResourceVersion, and the next watch asks from it (which the
//     gate answers without the server).
//     TestReflectorAcceptsSyntheticResourceVersion;
//     reflector.go (*Reflector).list, (*Reflector).watch.
//  11. A list replaces the store: an object it lacks reaches handlers as
//     a delete of a DeletedFinalStateUnknown holding its last cached
//     state. The gate's empty list (a resource no longer served) relies on
//     it.
//     TestReflectorReplaceDeletesMissingObjects;
//     the_real_fifo.go (*RealFIFO).Replace, controller.go processReplacedAllInfo.
//  12. A watch event whose object is not of the informer's type is
//     dropped. So the deletes and bookmarks the gate makes up are built as
//     the informer's type (AsWatched, Bookmark).
//     TestReflectorDropsEventsOfAnotherType; reflector.go handleAnyWatch.
//  13. A list error reaches the watch error handler wrapped (%w), so
//     errors.Is and apierrors' predicates see the server's error.
//     TestReflectorWrapsListErrorForHandler; reflector.go (*Reflector).list.
package reflectorseam

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// SyntheticRV is the resourceVersion of the empty list and of the bookmark
// the gate hands the reflector when a resource stops being served
// (behaviour 10). It is never sent to the server: the gate answers a
// watch from it itself.
const SyntheticRV = "1"

// Expired returns the 410 Expired status that makes the reflector relist
// after its backoff when Watch returns it (behaviour 1). why says what
// forces the relist.
func Expired(why string) error {
	return apierrors.NewResourceExpired("informerkit: " + why)
}

// ExpiredEvent returns the watch Error event carrying 410 Expired that
// ends a watch so the reflector relists after its backoff (behaviour 2).
func ExpiredEvent(why string) watch.Event {
	status := apierrors.NewResourceExpired("informerkit: " + why).Status()
	return watch.Event{Type: watch.Error, Object: &status}
}

// IsExpired reports whether the reflector takes err as "expired" and
// relists (client-go's isExpiredError: 410 Expired or Gone).
func IsExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// fallbackError is an answer to a watch-list request that makes the
// reflector fall back to a plain list (behaviour 5). It is not an API
// status: a 410 would make it stream again instead (behaviour 6).
type fallbackError struct{ msg string }

func (e *fallbackError) Error() string { return e.msg }

// The watch-list fallbacks: each makes a reflector that asked to stream a
// list send a plain LIST in the same ListAndWatch (behaviour 5). client-go
// logs the fallback at V(4) only and does not tell the watch error
// handler.
var (
	// ErrNotServedFallback: the resource is not served; the gate answers
	// the list.
	ErrNotServedFallback error = &fallbackError{"informerkit: resource not served; falling back to list"}
	// ErrRelistFallback: a fresh list is due (the gate is Relisting); a
	// relist is a real LIST.
	ErrRelistFallback error = &fallbackError{"informerkit: relisting; falling back to list"}
	// ErrProbeFallback: a liveness probe is due; a watch-list stream is
	// served from the server's watch cache, which is what may be stuck.
	ErrProbeFallback error = &fallbackError{"informerkit: no sign of life from the server; checking with a list"}
	// ErrRestoredFallback: the informer's first list is the one restored
	// from disk; the gate answers it, then the reflector watches from its
	// resourceVersion.
	ErrRestoredFallback error = &fallbackError{"informerkit: restored from disk; falling back to list"}
	// ErrWatchListDeclined: a merged watch over several namespaces is
	// listed, not streamed.
	ErrWatchListDeclined error = &fallbackError{"informerkit: several namespaces are listed, not streamed"}
	// ErrNotReadyFallback: the server answered a watch-list request 429
	// Too Many Requests. An API server answers so while the watch cache of
	// a resource is (re)initializing — for a custom resource, on the first
	// request after its CRD was created or the server restarted — and a
	// plain LIST is then served from etcd at once, while the reflector
	// would retry the stream only after its back-off (about 1 s). A 429 of
	// an overloaded server gets the same list, which is refused in turn
	// and backed off as any failed list.
	ErrNotReadyFallback error = &fallbackError{"informerkit: the server's watch cache is not ready (429); falling back to list"}
)

// IsWatchListFallback reports whether err is one of the watch-list
// fallbacks above: not a failure, a plain list follows.
func IsWatchListFallback(err error) bool {
	var f *fallbackError
	return errors.As(err, &f)
}

// WatchListRequested reports whether a watch request asks to stream a
// list (the reflector's watch-list request, behaviour 5).
func WatchListRequested(opts metav1.ListOptions) bool {
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents
}

// EndsInitialEvents reports whether a bookmark's object ends a watch-list
// stream's initial events (behaviour 8).
func EndsInitialEvents(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
