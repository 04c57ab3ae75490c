package gate

import (
	"context"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// SyntheticRV is reflectorseam.SyntheticRV: the resourceVersion of the
// empty list and of the bookmark the gate hands the reflector when a
// resource stops being served.
const SyntheticRV = reflectorseam.SyntheticRV

// ErrNotServedFallback is reflectorseam.ErrNotServedFallback: the answer
// to a watch-list request while the resource is not served.
var ErrNotServedFallback = reflectorseam.ErrNotServedFallback

// ErrRelistFallback is reflectorseam.ErrRelistFallback: the answer to a
// watch-list request while a fresh list is due (Relisting).
var ErrRelistFallback = reflectorseam.ErrRelistFallback

// ErrNotReadyFallback is reflectorseam.ErrNotReadyFallback: the answer to
// a watch-list request the server refused with 429 (its watch cache not
// ready yet).
var ErrNotReadyFallback = reflectorseam.ErrNotReadyFallback

// NotFoundReason is the gate's reason when the server answered 404.
const NotFoundReason = "the API server answered 404 Not Found"

// Phase is where an informer's list/watch is, as the gate sees it.
type Phase int

const (
	// Pending: never listed. Lists wait for the gate to open; so does a
	// watch-list stream (the first sync streams instead of one large LIST).
	Pending Phase = iota
	// Serving: the cache holds a list of the served resource; watches go
	// to the server.
	Serving
	// Emptied: the resource stopped being served and the cache was given a
	// delete per object. Watches wait for the gate to open; the first one
	// then refills the cache inside its stream (a list, an add per object,
	// a bookmark at the list's resourceVersion, then the server's events).
	Emptied
	// Relisting: the cache holds objects, but the next list must be a
	// fresh one (the version followed changed, a refill was cut short, or
	// a periodic relist is due); a plain watch answers "expired" and a
	// watch-list request falls back, so the reflector sends a real LIST
	// and replaces its store with it.
	Relisting
)

func (p Phase) String() string {
	return [...]string{"Pending", "Serving", "Emptied", "Relisting"}[p]
}

// Hooks is what the ListerWatcher tells its informer, on the reflector's
// goroutine or a stream's. None may block or call back into the
// ListerWatcher.
type Hooks struct {
	// ListStarted: a real list (or watch-list stream) is about to be sent.
	ListStarted func()
	// Listed: a real list succeeded at rv ("" for a watch-list stream,
	// which counts once open; the informer's HasSynced tells when its
	// initial events are in).
	Listed func(rv string)
	// NotFound: the server answered 404 for the collection. The gate is
	// already closed; the informer should ask for a re-check.
	NotFound func(err error)
	// Emptied: every cached object was handed to the reflector as a delete
	// (or as a Replace with an empty list).
	Emptied func(reason string)
	// Waiting: the informer never listed and waits for the gate.
	Waiting func(reason string)
	// Watching: a stream of the server's events was handed to the
	// reflector (nil: not told).
	Watching func()
	// WaitingForSlot: the first list waits for an initial-list slot (nil:
	// not told).
	WaitingForSlot func()
	// Restored: the list restored from disk (SetRestored) was handed to
	// the reflector at rv (nil: not told).
	Restored func(rv string)
}

// Recorder is told what a ListerWatcher hands its reflector, in the
// order handed: the lists that replace the reflector's store and the
// events that change it. Replayed in that order, the calls rebuild the
// reflector's store as it was handed, which the informer's cache holds
// once its queue is drained (an informer's disk journal, which so never
// lags the cache by more than the queue, needs no listener of its own,
// and never holds a state the reflector was not handed).
//
// ListBegun, then ListPage until end (a list's pages), or ListBegun then
// Observe until a bookmark ending the initial events (a watch-list
// stream), or ListBegun, events, then ListEnded (a refill delivered as
// events): together these replace the store; keys the list did not
// bring are gone at its end. A list may be abandoned (never ended): the
// next ListBegun starts over. Calls come from the reflector's goroutine
// (lists) and the streams' (events); never two at once for one
// ListerWatcher, as the reflector reads one thing at a time. None may
// block or call back into the ListerWatcher.
type Recorder interface {
	// ListBegun: a list (its pages, or the events of a watch-list
	// stream or a refill) follows, to replace the reflector's store.
	ListBegun()
	// ListPage: a page of the list begun, about to be handed to the
	// reflector; its items may be read until ListPage returns (the
	// reflector's transforms may change them after). end: the last page,
	// at resourceVersion rv ("" for a list the gate made up: an empty
	// one, for a resource no longer served).
	ListPage(list runtime.Object, end bool, rv string)
	// ListEnded: the events of the list begun (a refill's) were all
	// taken; it is complete at rv.
	ListEnded(rv string)
	// Observe is listwatch.Stream.Observe: ev is about to be offered to
	// the reflector (read it now); taken, if not nil, is called once the
	// reflector took it.
	Observe(ev watch.Event) (taken func())
}

// ListerWatcher is the toolscache.ListerWatcherWithContext an informer's
// reflector uses. It consults the Gate before every request and runs the
// informer's Phase:
//
//   - Pending: List blocks until the gate opens, then (once) until Access
//     allows, then until an initial-list slot is free, then lists.
//   - Serving: requests go to the server (through Server). When the gate
//     closes, the open stream delivers a delete per cached object (its
//     last cached state) and ends; with no stream open, the next watch
//     does that, or the next list answers an empty list. Either way the
//     phase becomes Emptied.
//   - Emptied: watches block until the gate opens, then refill the cache
//     inside their stream; lists block too (a Sweep makes a waiting list
//     answer an empty list).
//   - A watch-list stream whose initial events have not all been
//     delivered when the gate closes ends with no deletes (the reflector
//     drops such a stream's events); its next request lists, and the
//     list is empty, as in Serving.
//   - Relisting: the next list is fresh; a plain watch answers "expired".
//
// Transitions happen inside watch streams, so the reflector does not go
// back to its relist loop (whose backoff grows to 30 s) for them; so do
// shard switches (Switch) when Keys is set. A 404
// answer closes the gate (not authoritatively) and calls Hooks.NotFound.
//
// All exported fields are set before first use and not changed after.
type ListerWatcher struct {
	Gate   *Gate
	Server *listwatch.Liveness
	Hooks  Hooks
	// EmptyList builds an empty list at rv of the reflector's list type.
	EmptyList func(rv string) runtime.Object
	// Cached lists the informer's cache. AsWatched turns a cached object
	// into a copy of the type the reflector expects (nil: skip it).
	// Bookmark builds a bookmark object at rv.
	Cached    func() []interface{}
	AsWatched func(obj interface{}) runtime.Object
	Bookmark  func(rv string) runtime.Object
	// NoWatchList is true when the client cannot stream lists.
	NoWatchList bool
	// InitialLists bounds the informer's first list (Pending phase) with
	// the factory's other informers' (nil: no bound). A plain list holds
	// its slot until it returns; a watch-list stream until the bookmark
	// that ends its initial events has been delivered, or it ends. Later
	// lists (relists, refills) are not bounded.
	InitialLists *Slots
	// Access, if set, is called before the first list (Pending phase,
	// gate open) and blocks until the informer may list (nil) or ctx ends;
	// no request of the informer is sent meanwhile. Once it returned nil
	// it is not called again.
	Access func(ctx context.Context) error
	// Keys, if set, records what the reflector was handed (see KeySet)
	// and lets Switch happen inside the open stream. CachedByKey returns
	// the cached object of a key (it must be set with Keys; set without
	// Keys, it lets removals and refills skip the deletes the reflector
	// was already handed: see queuedDeletes).
	Keys        *KeySet
	CachedByKey func(key string) (interface{}, bool)
	// Journal, if set, is told what the reflector is handed, in the
	// order handed (see Recorder).
	Journal Recorder

	// queuedDeletes are the keys of deletes handed to the reflector that
	// the cache (CachedByKey) may not have taken in yet: the informer's
	// queue lags the streams. A removal or a refill builds its deletes
	// from the cache; a key here already has its delete on the way, and a
	// second one would reach handlers as the delete of an object they no
	// longer hold. A key leaves when an add or update of it is handed
	// after its delete, or a list page holding it (forgetListed); pruned
	// of keys the cache no longer holds.
	qmu           sync.Mutex // guards queuedDeletes, queuedLimit
	queuedDeletes map[string]struct{}
	queuedLimit   int
	queuedAny     atomic.Bool // len(queuedDeletes) > 0, read per event without qmu

	mu         sync.Mutex // guards phase, active, accessOK, listing, relistDue, switching, switchGen, relistGen, restored
	phase      Phase
	restored   runtime.Object // SetRestored's list, until the first list takes it
	stale      bool           // SetRestoredStale: after restored, the reflector lists again
	goneReason string         // SetRestoredGone's reason, until its removal stream takes it
	goneList   runtime.Object // SetRestoredGone's list, for that stream
	active     *activeStream  // the open stream, if any
	accessOK   bool           // Access returned nil
	listing    bool           // a list request is in flight
	relistDue  bool           // Relist was called while listing: that list may predate it
	switching  bool           // a stream is switching (Switch): listing the new selection
	switchGen  uint64         // counts Switch calls
	relistGen  uint64         // counts Relist calls
	sweep      chan struct{}  // Sweep's request to a watch waiting in Emptied (buffered 1; made on first use)
}

// activeStream is the stream the reflector reads now.
type activeStream struct {
	interrupt chan struct{}     // closed to end it
	relist    bool              // it ends "expired" (Relist), not with a removal
	switching bool              // it switches to a new list (Switch); guarded by ListerWatcher.mu
	next      *listwatch.Stream // the stream it continues with (its goroutine only)
	// initialEvents: a watch-list stream whose bookmark ending its
	// initial events has not been delivered yet (set before the stream
	// starts; then its goroutine only).
	initialEvents bool
}

var _ toolscache.ListerWatcherWithContext = (*ListerWatcher)(nil)

// Phase returns the current phase.
func (lw *ListerWatcher) Phase() Phase {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.phase
}

// SetServed opens or closes the gate (see Gate.Set). Closing it ends the
// open stream with a delete per cached object.
func (lw *ListerWatcher) SetServed(open bool, reason string, authoritative bool) {
	if lw.Gate.Set(open, reason, authoritative) && !open {
		lw.mu.Lock()
		lw.interruptLocked()
		lw.mu.Unlock()
	}
}

// SetRestored gives the informer's first list: while the phase is
// Pending, the reflector's first list (once the gate is open) is answered
// with list, without the server and without Access or an initial-list
// slot, and a watch-list request falls back to that list
// (reflectorseam.ErrRestoredFallback). The reflector then watches from
// list's resourceVersion; if the server cannot resume from it (410), the
// reflector lists again, from the server, and its Replace turns the
// difference into adds, updates and deletes. Call it before the informer
// runs.
func (lw *ListerWatcher) SetRestored(list runtime.Object) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.restored, lw.goneReason, lw.goneList, lw.stale = list, "", nil, false
}

// SetRestoredStale is SetRestored for a list that no resourceVersion
// describes (stored while a list was under way): it is handed over as
// the first list, then the phase is Relisting, so the reflector's watch
// answers "expired" and it lists from the server at once; its Replace
// turns the difference into adds, updates and deletes. Call it before
// the informer runs.
func (lw *ListerWatcher) SetRestoredStale(list runtime.Object) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.restored, lw.goneReason, lw.goneList, lw.stale = list, "", nil, list != nil
}

// SetRestoredGone is SetRestored for a list whose objects are gone from
// the server (their CustomResourceDefinition was deleted, or deleted and
// created again, since they were stored): the reflector's first list is
// answered with list whether the gate is open or not, and the watch that
// follows is a delete per cached object and a bookmark at SyntheticRV
// (as when the gate closes while Serving); the phase is then Emptied and
// Hooks.Emptied is told reason. The informer waits for the resource, or
// refills its cache inside the next watch if the gate is open. Call it
// before the informer runs.
func (lw *ListerWatcher) SetRestoredGone(list runtime.Object, reason string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.restored, lw.goneReason, lw.goneList, lw.stale = list, reason, list, false
}

// takeGone returns SetRestoredGone's reason and list once its list was
// handed over.
func (lw *ListerWatcher) takeGone() (string, runtime.Object, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.goneReason == "" || lw.restored != nil || lw.phase != Serving {
		return "", nil, false
	}
	reason, list := lw.goneReason, lw.goneList
	lw.goneReason, lw.goneList = "", nil
	return reason, list, true
}

func (lw *ListerWatcher) restoredPending() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.phase == Pending && lw.restored != nil
}

// Relist makes the reflector drop its watch and list again (the informer
// follows another version now, or a periodic relist is due): the open
// stream ends with "expired", and the next list is a real LIST whose
// result replaces the reflector's store. It does nothing unless the
// phase is Serving.
func (lw *ListerWatcher) Relist() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.relistGen++
	lw.relistLocked()
}

func (lw *ListerWatcher) relistLocked() {
	if lw.phase != Serving && lw.phase != Relisting {
		return // nothing listed, or the cache is being emptied
	}
	// Relisting with a stream open: the stream began before this call (a
	// watch-list stream opens while a relist is due) and may carry what
	// the call wants replaced; end it too.
	lw.phase = Relisting
	if lw.listing {
		// The list in flight may have been asked before this call (with
		// an older shard or version): once it returns, the informer lists
		// again instead of watching from it.
		lw.relistDue = true
	}
	if lw.active != nil {
		lw.active.relist = true
		lw.interruptLocked()
	}
}

// Switch makes the informer follow what its list and watch funcs ask for
// now (another shard): like Relist, the reflector's store is made to hold
// a fresh list, but inside the open stream when it can, so the reflector
// does not relist (nor wait for its backoff). With Keys set, the phase
// Serving, a stream open, no list in flight and Keys valid, the open
// stream stops its server watch, lists (consistent, through Server), and
// delivers an add per listed object (but those the cache holds at the
// listed resourceVersion), a delete per key of Keys the list
// lacks (the cached object, or one with the key's name, namespace and
// UID), a bookmark at the list's resourceVersion, then the events of a
// server watch from it. A Switch while one lists makes it list again. If
// the list or the watch fails (or Relist is called, or the gate closes,
// meanwhile) the stream ends "expired" and the reflector relists.
// Otherwise Switch is Relist.
func (lw *ListerWatcher) Switch() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.switchGen++
	if lw.switching {
		return // the switch under way sees switchGen and lists again
	}
	a := lw.active
	if lw.Keys == nil || lw.phase != Serving || a == nil || lw.listing || !lw.Keys.Valid() {
		lw.relistLocked()
		return
	}
	// Relisting until the new stream is armed: should the reader stop the
	// stream before it switched, its next watch answers "expired".
	lw.phase = Relisting
	lw.switching = true
	a.switching = true
	lw.interruptLocked()
}

func (lw *ListerWatcher) interruptLocked() {
	if lw.active != nil {
		close(lw.active.interrupt)
		lw.active = nil
	}
}

// ListWithContext implements toolscache.ListerWatcherWithContext.
func (lw *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		// A later page: the gate was checked on page one.
		obj, err := lw.Server.List(ctx, opts, false)
		if err == nil {
			lw.keysPage(obj)
			lw.journalPage(obj)
		}
		return obj, err
	}
	for {
		lw.mu.Lock()
		gone := lw.phase == Pending && lw.restored != nil && lw.goneReason != ""
		lw.mu.Unlock()
		if gone {
			return lw.handRestored(), nil
		}
		open, reason, _ := lw.Gate.State()
		lw.mu.Lock()
		phase := lw.phase
		if !open && (phase == Serving || phase == Relisting) {
			// The cache may hold objects of a resource no longer served:
			// an empty list makes the reflector's Replace delete them.
			lw.phase = Emptied
			lw.mu.Unlock()
			lw.Server.Forget()
			lw.Hooks.Emptied(reason)
			return lw.handEmpty(), nil
		}
		lw.mu.Unlock()
		if !open {
			if phase == Pending {
				lw.Hooks.Waiting(reason)
			}
			swept, err := lw.waitOpen(ctx, phase == Emptied)
			if err != nil {
				return nil, err
			}
			if swept {
				// Emptied, yet the cache holds objects (Sweep): an empty
				// list, whose Replace deletes them.
				return lw.handEmpty(), nil
			}
			continue
		}
		if phase == Pending {
			if list := lw.handRestored(); list != nil {
				return list, nil
			}
		}
		initial := phase == Pending
		if initial {
			if checked, err := lw.checkAccess(ctx); err != nil {
				return nil, err
			} else if checked {
				continue // the gate may have closed meanwhile
			}
			if err := lw.acquireSlot(ctx); err != nil {
				return nil, err
			}
		}
		lw.Hooks.ListStarted()
		lw.mu.Lock()
		lw.listing, lw.relistDue = true, false
		lw.mu.Unlock()
		if lw.Keys != nil {
			lw.Keys.beginList()
		}
		if lw.Journal != nil {
			lw.Journal.ListBegun()
		}
		obj, err := lw.Server.List(ctx, opts, phase == Emptied || phase == Relisting)
		lw.mu.Lock()
		lw.listing = false
		lw.mu.Unlock()
		if initial {
			lw.InitialLists.Release()
		}
		if apierrors.IsNotFound(err) {
			lw.notFound(err)
			continue
		}
		if err != nil {
			return nil, err // the reflector's error handler records it
		}
		lw.keysPage(obj)
		lw.journalPage(obj)
		rv, _ := listwatch.ListRV(obj)
		lw.mu.Lock()
		lw.phase = Serving
		if lw.relistDue {
			// Relist was asked while this list was in flight: the watch
			// that follows answers "expired" and the reflector lists again.
			lw.phase, lw.relistDue = Relisting, false
		}
		lw.mu.Unlock()
		lw.Hooks.Listed(rv)
		return obj, nil
	}
}

// handEmpty hands the reflector an empty list at SyntheticRV: its Replace
// deletes every cached object.
func (lw *ListerWatcher) handEmpty() runtime.Object {
	empty := lw.EmptyList(SyntheticRV)
	if lw.Keys != nil {
		lw.Keys.beginList()
		lw.keysPage(empty)
	}
	if lw.Journal != nil {
		lw.Journal.ListBegun()
		lw.Journal.ListPage(empty, true, "")
	}
	return empty
}

// waitOpen waits for the gate to open or ctx to end; with sweeps, a Sweep
// request made while the phase is Emptied ends the wait too (swept).
// Lists and watches that wait in Emptied (awaitReturn) share it.
func (lw *ListerWatcher) waitOpen(ctx context.Context, sweeps bool) (swept bool, err error) {
	if !sweeps {
		return false, lw.Gate.WaitOpen(ctx)
	}
	sweep := lw.sweeps()
	for {
		open, _, changed := lw.Gate.State()
		if open {
			return false, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-sweep:
			if lw.Phase() == Emptied {
				return true, nil
			}
		}
	}
}

// handRestored hands the restored list (nil if there is none) over as
// the reflector's first list: the phase becomes Serving.
func (lw *ListerWatcher) handRestored() runtime.Object {
	lw.mu.Lock()
	list := lw.restored
	lw.restored = nil
	if list != nil {
		lw.phase = Serving
		if lw.stale {
			lw.phase, lw.stale = Relisting, false
		}
	}
	lw.mu.Unlock()
	if list == nil {
		return nil
	}
	if lw.Keys != nil {
		lw.Keys.beginList()
		lw.keysPage(list)
	}
	rv, _ := listwatch.ListRV(list)
	if lw.Hooks.Restored != nil {
		lw.Hooks.Restored(rv)
	}
	return list
}

// WatchWithContext implements toolscache.ListerWatcherWithContext. It
// answers by one of the watchPaths (see watchPathOf); a watch-list request
// of a Pending informer first waits for the gate to open and for Access.
func (lw *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	watchList := reflectorseam.WatchListRequested(opts)
	if watchList && lw.restoredPending() {
		return nil, reflectorseam.ErrRestoredFallback
	}
	if reason, list, ok := lw.takeGone(); ok {
		// A delete per object of the list handed over: the informer's
		// cache may not hold them yet (its FIFO may not have been
		// popped), and the reflector's FIFO orders each delete after
		// its add.
		return lw.removalOf(reason, func() []interface{} {
			var objs []interface{}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				objs = append(objs, o)
				return nil
			})
			return objs
		}), nil
	}
	if watchList && lw.Phase() == Pending {
		if err := lw.awaitFirstStream(ctx); err != nil {
			return nil, err
		}
	}
	open, reason, _ := lw.Gate.State()
	phase := lw.Phase()
	switch watchPathOf(watchList, open, phase) {
	case streamServer:
		return lw.streamServer(ctx, opts, phase == Pending)
	case watchServer:
		return lw.watchServer(ctx, opts, phase)
	case relistExpired:
		return nil, reflectorseam.Expired("relisting")
	case relistFallback:
		return nil, reflectorseam.ErrRelistFallback
	case notServedFallback:
		return nil, reflectorseam.ErrNotServedFallback
	case removeCached:
		return lw.removal(reason), nil
	default: // awaitReturn
		return lw.awaitReturn(ctx, opts)
	}
}

// watchPath is how the gate answers a watch request. The reflector's own
// paths each answer leads to are listed in package reflectorseam.
type watchPath int

const (
	// watchServer: a plain watch of the server (Serving; or Pending, which
	// the reflector does not watch before a list).
	watchServer watchPath = iota
	// streamServer: a watch-list stream of the server (Serving, or Pending:
	// the first sync streams; it holds an initial-list slot).
	streamServer
	// relistExpired: a fresh list is due (Relisting): "expired", the
	// reflector relists.
	relistExpired
	// relistFallback: a fresh list is due and the reflector asked to
	// stream: it falls back to a real LIST.
	relistFallback
	// notServedFallback: the reflector asked to stream a resource not
	// served (or emptied): it falls back to a list, which the gate answers.
	notServedFallback
	// removeCached: the resource stopped being served while listed: a
	// stream of a delete per cached object and a bookmark at SyntheticRV.
	removeCached
	// awaitReturn: the resource is not served (or was emptied): wait for
	// it to return, then refill the cache inside the stream.
	awaitReturn
)

func (p watchPath) String() string {
	return [...]string{"watchServer", "streamServer", "relistExpired", "relistFallback", "notServedFallback", "removeCached", "awaitReturn"}[p]
}

// watchPathOf chooses the answer to a watch request (watchList: it asks to
// stream a list) from the gate (open) and the phase.
func watchPathOf(watchList, open bool, phase Phase) watchPath {
	listed := phase == Serving || phase == Relisting
	switch {
	case watchList && (!open || phase == Emptied):
		return notServedFallback
	case watchList && phase == Relisting:
		return relistFallback
	case watchList:
		return streamServer
	case !open && listed:
		return removeCached
	case !open || phase == Emptied:
		return awaitReturn
	case phase == Relisting:
		return relistExpired
	default:
		return watchServer
	}
}

// awaitFirstStream runs before the first sync streams (Pending): it tells
// the informer it waits, waits for the gate to open, then for Access.
func (lw *ListerWatcher) awaitFirstStream(ctx context.Context) error {
	if open, reason, _ := lw.Gate.State(); !open {
		lw.Hooks.Waiting(reason)
		if err := lw.Gate.WaitOpen(ctx); err != nil {
			return err
		}
	}
	_, err := lw.checkAccess(ctx)
	return err
}

// watchServer opens a plain server watch. A 404 closes the gate; if the
// cache holds a list (Serving), the answer is then the removal stream.
func (lw *ListerWatcher) watchServer(ctx context.Context, opts metav1.ListOptions, phase Phase) (watch.Interface, error) {
	s, err := lw.Server.Watch(ctx, opts)
	if apierrors.IsNotFound(err) {
		lw.notFound(err)
		if phase == Serving {
			_, reason, _ := lw.Gate.State()
			return lw.removal(reason), nil
		}
	}
	if err != nil {
		return nil, err
	}
	return lw.start(ctx, opts, s), nil
}

// streamServer opens a watch-list stream of the server. The first sync
// (initial) holds an initial-list slot until its initial events end.
func (lw *ListerWatcher) streamServer(ctx context.Context, opts metav1.ListOptions, initial bool) (watch.Interface, error) {
	if initial {
		if err := lw.acquireSlot(ctx); err != nil {
			return nil, err
		}
	}
	lw.Hooks.ListStarted()
	if lw.Keys != nil {
		lw.Keys.beginList() // the initial events end it (KeySet.observe)
	}
	if lw.Journal != nil {
		lw.Journal.ListBegun() // the initial events end it
	}
	s, err := lw.Server.Watch(ctx, opts)
	if initial && err != nil {
		lw.InitialLists.Release()
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			lw.notFound(err)
		}
		if apierrors.IsTooManyRequests(err) {
			// A watch cache still initializing (the first request for a
			// custom resource): a plain list is served at once.
			return nil, reflectorseam.ErrNotReadyFallback
		}
		return nil, err
	}
	lw.mu.Lock()
	if lw.phase != Relisting {
		// (Relisting: Relist or Switch came while this request was on
		// its way; arm ends the stream "expired".)
		lw.phase = Serving
	}
	lw.mu.Unlock()
	lw.Hooks.Listed("")
	a := lw.arm(ctx, opts, s)
	a.initialEvents = true
	s.InitialEventsEnd = func(string) {
		a.initialEvents = false
		if initial {
			lw.InitialLists.Release()
		}
	}
	return s.Start(), nil
}

// awaitReturn waits for the gate to open, then refills the cache inside
// the stream (refill). If the phase is no longer Emptied (the cache was
// never listed, or a list ran meanwhile), it answers "expired" so the
// reflector lists.
func (lw *ListerWatcher) awaitReturn(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	for {
		swept, err := lw.waitOpen(ctx, true)
		if err != nil {
			return nil, err
		}
		if swept {
			// Objects whose add the reflector still had queued when the
			// removal's deletes were taken reached the cache after them:
			// a delete for each (removalEvents skips keys whose delete is
			// on the way), then the reflector watches again and waits
			// here.
			_, reason, _ := lw.Gate.State()
			return lw.removal(reason), nil
		}
		if lw.Phase() != Emptied {
			return nil, reflectorseam.Expired("resource served; listing")
		}
		w, err := lw.refill(ctx, opts)
		if open, _, _ := lw.Gate.State(); apierrors.IsNotFound(err) && !open {
			// A CRD is announced Established a moment before its
			// handler serves it: wait here for the re-check, not in
			// the reflector's backoff.
			continue
		}
		return w, err
	}
}

// keysPage records a list page handed to the reflector: in Keys (the
// last page ends the list), and in queuedDeletes (forgetListed).
func (lw *ListerWatcher) keysPage(list runtime.Object) {
	lw.forgetListed(list)
	if lw.Keys == nil {
		return
	}
	lw.Keys.listPage(list)
	if l, err := meta.ListAccessor(list); err != nil || l.GetContinue() == "" {
		lw.Keys.endList()
	}
}

// journalPage tells Journal of a list page about to be handed to the
// reflector: the last page (no continue token) ends the list.
func (lw *ListerWatcher) journalPage(list runtime.Object) {
	if lw.Journal == nil {
		return
	}
	end, rv := true, ""
	if l, err := meta.ListAccessor(list); err == nil {
		end, rv = l.GetContinue() == "", l.GetResourceVersion()
	}
	lw.Journal.ListPage(list, end, rv)
}

// checkAccess runs Access once, before the first list; checked reports
// whether it ran now (and may have blocked).
func (lw *ListerWatcher) checkAccess(ctx context.Context) (checked bool, err error) {
	lw.mu.Lock()
	done := lw.accessOK || lw.Access == nil
	lw.mu.Unlock()
	if done {
		return false, nil
	}
	if err := lw.Access(ctx); err != nil {
		return true, err
	}
	lw.mu.Lock()
	lw.accessOK = true
	lw.mu.Unlock()
	return true, nil
}

// acquireSlot takes an initial-list slot, telling the informer first if
// it has to wait for one.
func (lw *ListerWatcher) acquireSlot(ctx context.Context) error {
	if lw.InitialLists.TryAcquire() {
		return nil
	}
	if lw.Hooks.WaitingForSlot != nil {
		lw.Hooks.WaitingForSlot()
	}
	return lw.InitialLists.Acquire(ctx)
}

func (lw *ListerWatcher) notFound(err error) {
	lw.SetServed(false, NotFoundReason, false)
	lw.Hooks.NotFound(err)
}

// refill lists the resource again after a removal and returns a stream
// that delivers an add per listed object, a delete per cached object the
// list does not have (an add that was in flight during the removal), a
// bookmark at the list's resourceVersion, then the server's events. If the
// stream ends before its bookmark went out, the next list is fresh.
func (lw *ListerWatcher) refill(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	lw.Hooks.ListStarted()
	if lw.Journal != nil {
		lw.Journal.ListBegun()
	}
	list, err := lw.Server.List(ctx, metav1.ListOptions{}, true)
	if err != nil {
		if apierrors.IsNotFound(err) {
			lw.notFound(err)
		}
		return nil, err
	}
	rv, err := listwatch.ListRV(list)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	wopts := opts
	wopts.ResourceVersion, wopts.ResourceVersionMatch, wopts.SendInitialEvents = rv, "", nil
	s, err := lw.Server.Watch(ctx, wopts)
	if err != nil {
		if apierrors.IsNotFound(err) {
			lw.notFound(err)
		}
		return nil, err
	}
	lw.mu.Lock()
	lw.phase = Serving
	lw.mu.Unlock()
	lw.Hooks.Listed(rv)
	events := make([]watch.Event, 0, len(items)+1)
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		events = append(events, watch.Event{Type: watch.Added, Object: it})
		if k, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
			listed[k] = true
		}
	}
	for _, obj := range lw.Cached() {
		// (A key whose delete is on the way — the removal's, or the
		// server's before it — is not deleted twice.)
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil && !listed[k] && !lw.deleteQueued(k) {
			if o := lw.AsWatched(obj); o != nil {
				events = append(events, watch.Event{Type: watch.Deleted, Object: o})
			}
		}
	}
	s.Prefix = append(events, watch.Event{Type: watch.Bookmark, Object: lw.Bookmark(rv)})
	if lw.Journal != nil {
		s.PrefixDelivered = func() { lw.Journal.ListEnded(rv) }
	}
	s.Interrupted = func() {
		lw.mu.Lock()
		if lw.phase == Serving {
			lw.phase = Relisting
		}
		lw.mu.Unlock()
	}
	return lw.start(ctx, opts, s), nil
}

// start makes s the active stream and starts it. If the gate closed
// meanwhile, s is interrupted at once.
func (lw *ListerWatcher) start(ctx context.Context, opts metav1.ListOptions, s *listwatch.Stream) watch.Interface {
	lw.arm(ctx, opts, s)
	return s.Start()
}

// arm makes s (not started, or about to be adopted by the stream that
// switches) the active stream: it sets its Interrupt, Final, Done, Then
// and Ended. ctx and opts are the watch request's (a switch watches again
// with them). Fields of the activeStream it returns may be set until s
// starts.
func (lw *ListerWatcher) arm(ctx context.Context, opts metav1.ListOptions, s *listwatch.Stream) *activeStream {
	a := &activeStream{interrupt: make(chan struct{})}
	var removing bool
	var why string
	s.Interrupt = a.interrupt
	s.Final = func() []watch.Event {
		lw.mu.Lock()
		relist, switching := a.relist, a.switching
		phase := lw.phase
		lw.mu.Unlock()
		if relist {
			return expiredEvents()
		}
		if switching {
			next, events := lw.switchStream(ctx, opts, a)
			a.next = next
			return events
		}
		open, reason, _ := lw.Gate.State()
		if open || phase != Serving {
			return nil
		}
		if a.initialEvents {
			// A watch-list stream before the bookmark that ends its
			// initial events: the reflector keeps what it reads in a
			// store of its own until that bookmark and drops it when the
			// stream ends without one, so deletes handed now would never
			// reach the cache. The stream ends with none; the phase
			// stays Serving, the reflector's next watch-list request
			// falls back to a list, and the gate answers it with an
			// empty list, whose Replace deletes every cached object.
			return nil
		}
		removing, why = true, reason
		return lw.removalEvents(lw.Cached)
	}
	s.Done = func(delivered bool) {
		if removing && delivered {
			lw.emptied(why)
		}
	}
	s.Then = func() *listwatch.Stream {
		n := a.next
		a.next = nil
		return n
	}
	s.Ended = func() {
		lw.mu.Lock()
		if lw.active == a {
			lw.active = nil
		}
		if a.switching {
			// Stopped by the reader before it switched: the phase is
			// Relisting, its next watch answers "expired".
			lw.switching, a.switching = false, false
		}
		lw.mu.Unlock()
		if n := a.next; n != nil {
			// The reader stopped before it was adopted: it ends too.
			a.next = nil
			n.Discard()
			n.Ended()
		}
	}
	s.Observe = lw.observe
	lw.mu.Lock()
	lw.active = a
	if lw.phase == Relisting {
		// Relist or Switch was called after this stream's request was
		// chosen and before it became active: they found no stream to
		// end, and this one may be of the old shard or version (the
		// filter read it before the call). It ends "expired" so the
		// reflector lists what is asked for now.
		a.relist = true
		lw.interruptLocked()
	}
	lw.mu.Unlock()
	if lw.Hooks.Watching != nil {
		lw.Hooks.Watching()
	}
	if open, _, _ := lw.Gate.State(); !open {
		lw.mu.Lock()
		if lw.active == a {
			lw.interruptLocked()
		}
		lw.mu.Unlock()
	}
	return a
}

func expiredEvents() []watch.Event {
	return []watch.Event{reflectorseam.ExpiredEvent("relisting")}
}

// switchStream runs on the stream being switched (Switch), once its
// server watch is stopped and all it delivered was recorded in Keys: it
// lists, opens a watch from the list, and returns that stream (not
// started) with the switch's events as its prefix. On failure it returns
// no stream and an "expired" error event, and the phase stays Relisting.
func (lw *ListerWatcher) switchStream(ctx context.Context, opts metav1.ListOptions, a *activeStream) (*listwatch.Stream, []watch.Event) {
	fail := func() (*listwatch.Stream, []watch.Event) {
		lw.mu.Lock()
		lw.switching, a.switching = false, false
		if lw.phase == Serving {
			lw.phase = Relisting
		}
		lw.mu.Unlock()
		return nil, expiredEvents()
	}
	for {
		lw.mu.Lock()
		gen, rgen := lw.switchGen, lw.relistGen
		lw.mu.Unlock()
		if open, _, _ := lw.Gate.State(); !open {
			return fail()
		}
		// The filter's Listed (the shard is held) waits until the
		// reader took the switch's events.
		lctx, listed := listwatch.DeferListed(ctx)
		list, err := lw.Server.List(lctx, metav1.ListOptions{}, true)
		if err != nil {
			if apierrors.IsNotFound(err) {
				lw.notFound(err)
			}
			return fail()
		}
		rv, err := listwatch.ListRV(list)
		if err != nil {
			return fail()
		}
		lw.mu.Lock()
		again := lw.switchGen != gen
		lw.mu.Unlock()
		if again {
			continue // switched again while listing
		}
		wopts := opts
		wopts.ResourceVersion, wopts.ResourceVersionMatch, wopts.SendInitialEvents = rv, "", nil
		next, err := lw.Server.Watch(ctx, wopts)
		if err != nil {
			if apierrors.IsNotFound(err) {
				lw.notFound(err)
			}
			return fail()
		}
		lw.mu.Lock()
		if lw.relistGen != rgen || lw.phase != Relisting {
			lw.mu.Unlock()
			next.Discard()
			return fail()
		}
		if lw.switchGen != gen {
			lw.mu.Unlock()
			next.Discard()
			continue // switched again while listing
		}
		lw.phase, lw.switching, a.switching = Serving, false, false
		lw.mu.Unlock()
		next.Prefix = lw.switchEvents(list, rv)
		next.PrefixDelivered = listed.Run
		next.Interrupted = func() {
			// Cut before its bookmark: the reflector's resourceVersion
			// may be an item's; list again. (A Switch that interrupts it
			// continues from what Keys recorded.)
			lw.mu.Lock()
			if lw.phase == Serving {
				lw.phase = Relisting
			}
			lw.mu.Unlock()
		}
		lw.arm(ctx, opts, next)
		return next, nil
	}
}

// switchEvents is an add per item of list (but those the cache holds at
// the same resourceVersion), a delete per key of Keys the list lacks, and
// a bookmark at rv.
func (lw *ListerWatcher) switchEvents(list runtime.Object, rv string) []watch.Event {
	var events []watch.Event
	listed := map[string]struct{}{}
	_ = meta.EachListItem(list, func(it runtime.Object) error {
		if k, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
			listed[k] = struct{}{}
			if lw.cachedAsIs(k, it) {
				return nil
			}
		}
		events = append(events, watch.Event{Type: watch.Added, Object: it})
		return nil
	})
	for key, uid := range lw.Keys.missing(listed) {
		var o runtime.Object
		if obj, ok := lw.CachedByKey(key); ok {
			o = lw.AsWatched(obj)
		}
		if o == nil {
			o = lw.gone(key, uid, rv)
		}
		events = append(events, watch.Event{Type: watch.Deleted, Object: o})
	}
	return append(events, watch.Event{Type: watch.Bookmark, Object: lw.Bookmark(rv)})
}

// cachedAsIs reports whether the cache holds key at it's resourceVersion.
// The list is newer than every event the stream delivered, so an object
// cached at the listed version has no other change queued: an add for it
// would only make handlers see an update that changes nothing (the
// reflector's Replace would have counted it a resync, not an update).
func (lw *ListerWatcher) cachedAsIs(key string, it runtime.Object) bool {
	obj, ok := lw.CachedByKey(key)
	if !ok {
		return false
	}
	c, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	m, err := meta.Accessor(it)
	return err == nil && m.GetResourceVersion() != "" && c.GetResourceVersion() == m.GetResourceVersion()
}

// gone is the object of a delete for a key the reflector was given but
// the cache does not hold yet (its add is still queued): its name,
// namespace and UID, at rv.
func (lw *ListerWatcher) gone(key string, uid types.UID, rv string) runtime.Object {
	ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
	o := lw.Bookmark(rv) // an empty object of the reflector's type
	if m, err := meta.Accessor(o); err == nil {
		m.SetNamespace(ns)
		m.SetName(name)
		m.SetUID(uid)
	}
	return o
}

// observe is every stream's Observe: the KeySet's record, the Journal's,
// and queuedDeletes. What it needs of the event it reads here, before the
// send; it records it once the reader took the event.
func (lw *ListerWatcher) observe(ev watch.Event) (taken func()) {
	var keys, journal func()
	if lw.Keys != nil {
		keys = lw.Keys.observe(ev)
	}
	if lw.Journal != nil {
		journal = lw.Journal.Observe(ev)
	}
	queued := lw.observeDelete(ev)
	switch {
	case journal == nil && queued == nil:
		return keys
	case keys == nil && queued == nil:
		return journal
	case keys == nil && journal == nil:
		return queued
	}
	return func() {
		for _, f := range [...]func(){keys, journal, queued} {
			if f != nil {
				f()
			}
		}
	}
}

// observeDelete is observe's part for queuedDeletes: a delete's key goes
// in, an add or update of a key in it takes it out (handed again after
// its delete).
func (lw *ListerWatcher) observeDelete(ev watch.Event) (taken func()) {
	if lw.CachedByKey == nil || (ev.Type != watch.Deleted && ev.Type != watch.Added && ev.Type != watch.Modified) {
		return nil
	}
	if ev.Type != watch.Deleted {
		if !lw.queuedAny.Load() {
			return nil // the common case: no key to compute, no lock
		}
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(ev.Object)
	if err != nil {
		return nil
	}
	deleted := ev.Type == watch.Deleted
	return func() {
		lw.qmu.Lock()
		defer lw.qmu.Unlock()
		defer func() { lw.queuedAny.Store(len(lw.queuedDeletes) > 0) }()
		if !deleted {
			delete(lw.queuedDeletes, key)
			return
		}
		if lw.queuedDeletes == nil {
			lw.queuedDeletes = make(map[string]struct{})
		}
		lw.queuedDeletes[key] = struct{}{}
		if len(lw.queuedDeletes) > max(lw.queuedLimit, 256) {
			for k := range lw.queuedDeletes {
				if _, ok := lw.CachedByKey(k); !ok {
					delete(lw.queuedDeletes, k) // taken in
				}
			}
			lw.queuedLimit = 2 * len(lw.queuedDeletes)
		}
	}
}

// forgetListed takes the keys of a list page handed to the reflector out
// of queuedDeletes: the list's Replace comes after any delete handed
// before it and puts its objects in the cache, where no watch event the
// gate sees would take them out (an object deleted, created again and
// brought back by a relist). Kept, such a key would be skipped by every
// later removal and refill, and its object stay cached.
func (lw *ListerWatcher) forgetListed(list runtime.Object) {
	if !lw.queuedAny.Load() {
		return
	}
	lw.qmu.Lock()
	defer lw.qmu.Unlock()
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if k, err := toolscache.MetaNamespaceKeyFunc(o); err == nil {
			delete(lw.queuedDeletes, k)
		}
		return nil
	})
	lw.queuedAny.Store(len(lw.queuedDeletes) > 0)
}

// deleteQueued reports whether a delete of key was handed to the
// reflector and the cache may not have taken it in yet.
func (lw *ListerWatcher) deleteQueued(key string) bool {
	lw.qmu.Lock()
	defer lw.qmu.Unlock()
	_, ok := lw.queuedDeletes[key]
	return ok
}

// Sweep asks a watch that waits for the resource to return (phase
// Emptied, the gate closed) to hand the reflector a delete for every
// cached object whose delete is not on the way, then wait again; a list
// that waits there answers an empty list instead, whose Replace deletes
// every cached object. The
// removal's deletes are taken from the cache when the resource goes; an
// add the reflector had queued but the cache had not yet taken in reaches
// the cache after them, and only a later look finds it. The informer calls
// Sweep while its cache is not empty after a removal. In another phase,
// or with no watch waiting, the request waits for the next watch that
// waits in Emptied (one request at most is kept).
func (lw *ListerWatcher) Sweep() {
	select {
	case lw.sweeps() <- struct{}{}:
	default:
	}
}

func (lw *ListerWatcher) sweeps() chan struct{} {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.sweep == nil {
		lw.sweep = make(chan struct{}, 1)
	}
	return lw.sweep
}

// removal returns a stream that delivers a delete per cached object and a
// bookmark at SyntheticRV, then ends (the reflector watches again at once:
// the stream had events). If it is stopped first, the phase stays and the
// next watch starts over.
func (lw *ListerWatcher) removal(reason string) watch.Interface {
	return lw.removalOf(reason, lw.Cached)
}

// removalOf is removal with the objects of cached.
func (lw *ListerWatcher) removalOf(reason string, cached func() []interface{}) watch.Interface {
	now := make(chan struct{})
	close(now)
	s := listwatch.NewStream(nil, nil)
	s.Interrupt = now
	s.Final = func() []watch.Event { return lw.removalEvents(cached) }
	s.Observe = lw.observe
	s.Done = func(delivered bool) {
		if delivered {
			lw.emptied(reason)
		}
	}
	return s.Start()
}

func (lw *ListerWatcher) emptied(reason string) {
	lw.mu.Lock()
	changed := lw.phase == Serving || lw.phase == Relisting
	if changed {
		lw.phase = Emptied
	}
	lw.mu.Unlock()
	if changed {
		lw.Server.Forget()
		lw.Hooks.Emptied(reason)
	}
}

// removalEvents is a delete per cached object and a bookmark at
// SyntheticRV. It copies the objects (AsWatched) on the calling stream's
// goroutine, holding no lock of the ListerWatcher.
func (lw *ListerWatcher) removalEvents(list func() []interface{}) []watch.Event {
	cached := list()
	events := make([]watch.Event, 0, len(cached)+1)
	for _, obj := range cached {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil && lw.deleteQueued(k) {
			continue // its delete is on the way
		}
		if o := lw.AsWatched(obj); o != nil {
			events = append(events, watch.Event{Type: watch.Deleted, Object: o})
		}
	}
	return append(events, watch.Event{Type: watch.Bookmark, Object: lw.Bookmark(SyntheticRV)})
}

// List implements the deprecated toolscache.Lister.
func (lw *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements the deprecated toolscache.Watcher.
func (lw *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported tells the reflector whether the client
// behind the informer can stream lists (client-go's watchlist contract).
func (lw *ListerWatcher) IsWatchListSemanticsUnSupported() bool { return lw.NoWatchList }
