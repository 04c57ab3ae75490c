package dynamicinformer

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// syntheticRV is the resourceVersion of the empty list a gated informer
// returns while its resource is not served. It is never sent to the server.
const syntheticRV = "1"

// errNotServedFallback makes a reflector in watch-list mode fall back to a
// plain List (which the gate answers) while the resource is not served.
// client-go logs that fallback at V(4) only.
var errNotServedFallback = errors.New("informerkit: resource not served; falling back to list")

// gate tracks whether the resource behind one informer is served, as far as
// the factory knows. While it is closed the gated ListerWatcher keeps the
// informer quiet. Before the first successful list, List blocks (Pending).
// After it, the next watch delivers a delete per cached object and ends
// (Removed); watches then block until the gate opens, and the first one
// after that lists the resource, delivers an add per object and goes on
// with the server's events (Syncing, Synced). A relist the reflector starts
// on its own while the gate is closed gets an empty list once (its Replace
// empties the cache) and then blocks. One mechanism covers "not installed
// yet", "deleted" and "installed again", keeping the same client-go
// informer and its handlers, and never sending the reflector back to its
// relist backoff for a transition.
type gate struct {
	mu      sync.Mutex    // guards open, reason, changed
	open    bool          // the resource is believed to be served
	reason  string        // why it is closed
	changed chan struct{} // closed and replaced whenever open changes
}

func newGate(open bool) *gate {
	return &gate{open: open, changed: make(chan struct{})}
}

// set opens or closes the gate; it reports whether anything changed.
// keepReason leaves the reason of an already closed gate alone (a 404
// must not replace the reason an authoritative source gave).
func (g *gate) set(open bool, reason string, keepReason bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !open && !(keepReason && !g.open) {
		g.reason = reason
	}
	if g.open == open {
		return false
	}
	g.open = open
	close(g.changed)
	g.changed = make(chan struct{})
	return true
}

func (g *gate) state() (open bool, reason string, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.reason, g.changed
}

// waitOpen blocks until the gate is open or ctx ends.
func (g *gate) waitOpen(ctx context.Context) error {
	for {
		open, _, changed := g.state()
		if open {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gateHooks is what the gated ListerWatcher tells its informer.
type gateHooks interface {
	// listStarted: a real list (or watch-list) is about to be sent.
	listStarted()
	// listSucceeded: a real list returned; rv is its resourceVersion.
	listSucceeded(rv string)
	// notFound: the server answered 404 for the collection: not served.
	notFound(err error)
	// emptied: the gate answered a synthetic empty list (Removed).
	emptied(reason string)
	// waiting: the informer waits for the resource to be served (Pending).
	waiting(reason string)
}

// gatedListerWatcher wraps the real ListerWatcher of one informer with its
// gate. It implements toolscache.ListerWatcherWithContext.
type gatedListerWatcher struct {
	inner     toolscache.ListerWatcherWithContext
	gate      *gate
	hooks     gateHooks
	emptyList func(rv string) runtime.Object
	// cached lists the informer's cache; asWatched turns a cached object
	// into one of the type the reflector expects (nil: skip it); bookmark
	// builds a bookmark object at rv. They let the gate empty and refill
	// the cache inside one watch stream (see WatchWithContext).
	cached    func() []interface{}
	asWatched func(obj interface{}) runtime.Object
	bookmark  func(rv string) runtime.Object
	// noWatchList is true when the client cannot stream lists (client-go's
	// fake clients); the reflector then uses list+watch.
	noWatchList bool

	mu            sync.Mutex      // guards listedOnce, lastSynthetic, forceRelist, activeWatch
	listedOnce    bool            // a real list has succeeded since the informer started
	lastSynthetic bool            // the last list answered was the synthetic empty one
	forceRelist   bool            // the next watch must give way to a fresh list (relist)
	activeWatch   watch.Interface // the open stream, finished when the gate closes
}

var _ toolscache.ListerWatcherWithContext = (*gatedListerWatcher)(nil)

func (lw *gatedListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		// A later page of a paginated list: the gate was checked on page one.
		return lw.inner.ListWithContext(ctx, opts)
	}
	for {
		open, reason, _ := lw.gate.state()
		if !open {
			lw.mu.Lock()
			listed := lw.listedOnce
			if listed {
				lw.lastSynthetic = true
				lw.listedOnce = false
			}
			lw.mu.Unlock()
			if listed {
				lw.hooks.emptied(reason)
				return lw.emptyList(syntheticRV), nil
			}
			lw.hooks.waiting(reason)
			if err := lw.gate.waitOpen(ctx); err != nil {
				return nil, err
			}
			continue
		}
		lw.mu.Lock()
		if lw.lastSynthetic || lw.forceRelist {
			// The reflector would ask for "not older than" our synthetic
			// version (or the old version's); ask the server for a fresh
			// consistent list instead.
			opts.ResourceVersion = ""
			opts.ResourceVersionMatch = ""
			lw.forceRelist = false
		}
		lw.mu.Unlock()
		lw.hooks.listStarted()
		obj, err := lw.inner.ListWithContext(ctx, opts)
		if err != nil {
			if apierrors.IsNotFound(err) {
				lw.hooks.notFound(err) // closes the gate
				continue
			}
			return nil, err // the watch error handler records it
		}
		rv := ""
		if m, merr := metaListRV(obj); merr == nil {
			rv = m
		}
		lw.mu.Lock()
		lw.listedOnce = true
		lw.lastSynthetic = false
		lw.mu.Unlock()
		lw.hooks.listSucceeded(rv)
		return obj, nil
	}
}

// WatchWithContext watches through the gate. Transitions of the resource
// happen inside watch streams, so the reflector never returns to its
// relist loop for them (each return there costs its backoff, 800ms growing
// to 30s): when the resource stops being served, the stream delivers a
// delete per cached object and ends; the next watch waits for the resource
// to be served again, lists it and delivers an add per object before the
// server's events.
func (lw *gatedListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	watchList := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	open, reason, _ := lw.gate.state()
	lw.mu.Lock()
	synthetic, listed, relist := lw.lastSynthetic, lw.listedOnce, lw.forceRelist
	if watchList && open && relist {
		relist = false // a watch-list stream is a fresh list
		lw.forceRelist = false
	}
	lw.mu.Unlock()
	if watchList && !open && !listed && !synthetic {
		// Never listed (Pending): wait for the resource here, as List
		// would, so that the first sync streams (watch-list) instead of
		// falling back to one large LIST.
		lw.hooks.waiting(reason)
		if err := lw.gate.waitOpen(ctx); err != nil {
			return nil, err
		}
		open = true
	}
	switch {
	case open && relist:
		return nil, apierrors.NewResourceExpired("informerkit: relisting at a new version")
	case watchList && (!open || synthetic):
		return nil, errNotServedFallback
	case !open && !synthetic && listed:
		// The cache holds objects of a resource no longer served.
		return lw.removalWatch(reason), nil
	case !open || synthetic:
		for {
			if err := lw.gate.waitOpen(ctx); err != nil {
				return nil, err
			}
			if !synthetic {
				return nil, apierrors.NewResourceExpired("informerkit: resource served again")
			}
			w, err := lw.relistWatch(ctx, opts)
			if open, _, _ := lw.gate.state(); apierrors.IsNotFound(err) && !open {
				// A CRD is announced Established a moment before its
				// handler serves it: notFound closed the gate and
				// scheduled a re-check; wait here, not in the
				// reflector's backoff.
				continue
			}
			return w, err
		}
	}
	if watchList {
		lw.hooks.listStarted()
	}
	w, err := lw.inner.WatchWithContext(ctx, opts)
	if err != nil {
		if apierrors.IsNotFound(err) {
			lw.hooks.notFound(err) // closes the gate
			if !watchList && listed {
				_, reason, _ := lw.gate.state()
				return lw.removalWatch(reason), nil
			}
		}
		return nil, err // the watch error handler records other errors
	}
	if watchList {
		// A watch-list stream counts as a successful list once it is open;
		// the informer's HasSynced tells when its initial events are in.
		lw.mu.Lock()
		lw.listedOnce = true
		lw.lastSynthetic = false
		lw.mu.Unlock()
		lw.hooks.listSucceeded("")
	}
	return lw.track(newGateWatch(nil, w, nil)), nil
}

// removalWatch empties the cache of a resource no longer served: a delete
// per cached object, then a bookmark at the synthetic resourceVersion, then
// the end of the stream (the reflector watches again at once: the stream
// had events).
func (lw *gatedListerWatcher) removalWatch(reason string) watch.Interface {
	lw.mu.Lock()
	lw.lastSynthetic, lw.listedOnce = true, false
	events := lw.removalEvents()
	lw.mu.Unlock()
	lw.hooks.emptied(reason)
	return newGateWatch(events, nil, nil)
}

// removalEvents is a delete per cached object and a bookmark at the
// synthetic resourceVersion.
func (lw *gatedListerWatcher) removalEvents() []watch.Event {
	var events []watch.Event
	for _, obj := range lw.cached() {
		if o := lw.asWatched(obj); o != nil {
			events = append(events, watch.Event{Type: watch.Deleted, Object: o})
		}
	}
	return append(events, watch.Event{Type: watch.Bookmark, Object: lw.bookmark(syntheticRV)})
}

// relistWatch refills an emptied cache once the resource is served again:
// it lists the resource, delivers an add per object and a bookmark at the
// list's resourceVersion, then forwards a server watch from there. If the
// stream is stopped before the bookmark went out, the next watch relists
// (resuming from an item's resourceVersion could miss older items).
func (lw *gatedListerWatcher) relistWatch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	lw.hooks.listStarted()
	list, err := lw.inner.ListWithContext(ctx, metav1.ListOptions{})
	if err == nil {
		var rv string
		var items []runtime.Object
		if rv, err = metaListRV(list); err == nil {
			items, err = meta.ExtractList(list)
		}
		if err == nil {
			wopts := opts
			wopts.ResourceVersion, wopts.ResourceVersionMatch, wopts.SendInitialEvents = rv, "", nil
			var w watch.Interface
			if w, err = lw.inner.WatchWithContext(ctx, wopts); err == nil {
				lw.mu.Lock()
				lw.listedOnce, lw.lastSynthetic, lw.forceRelist = true, false, false
				lw.mu.Unlock()
				lw.hooks.listSucceeded(rv)
				events := make([]watch.Event, 0, len(items)+1)
				listed := make(map[string]bool, len(items))
				for _, it := range items {
					events = append(events, watch.Event{Type: watch.Added, Object: it})
					if k, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
						listed[k] = true
					}
				}
				// Objects still cached that the list does not have (an add
				// that was in flight when the removal's deletes were taken)
				// go, as a relist's Replace would remove them.
				for _, obj := range lw.cached() {
					if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil && !listed[k] {
						if o := lw.asWatched(obj); o != nil {
							events = append(events, watch.Event{Type: watch.Deleted, Object: o})
						}
					}
				}
				events = append(events, watch.Event{Type: watch.Bookmark, Object: lw.bookmark(rv)})
				return lw.track(newGateWatch(events, w, func() {
					lw.mu.Lock()
					lw.forceRelist = true
					lw.mu.Unlock()
				})), nil
			}
		}
	}
	if apierrors.IsNotFound(err) {
		lw.hooks.notFound(err)
	}
	return nil, err
}

// track records w as the watch to finish when the gate closes; if it
// closed meanwhile, w is finished at once.
func (lw *gatedListerWatcher) track(w *gateWatch) watch.Interface {
	lw.mu.Lock()
	lw.activeWatch = w
	lw.mu.Unlock()
	if open, reason, _ := lw.gate.state(); !open {
		lw.gateClosed(reason)
	}
	return w
}

// gateWatch delivers prefix events, then forwards a server watch (if any).
// finish makes it deliver final events instead of anything further, then
// end: that is how a gate closing empties the cache inside the stream.
// interrupted, if set, is called when the stream is stopped or finished
// before all of prefix went out.
type gateWatch struct {
	prefix      []watch.Event
	inner       watch.Interface
	interrupted func()
	result      chan watch.Event
	stop        chan struct{} // closed by Stop (the consumer)
	stopOnce    sync.Once
	finished    chan struct{} // closed by finish

	mu    sync.Mutex // guards final, ended
	final []watch.Event
	ended bool // forward returned or committed to return without final
}

func newGateWatch(prefix []watch.Event, inner watch.Interface, interrupted func()) *gateWatch {
	w := &gateWatch{prefix: prefix, inner: inner, interrupted: interrupted,
		result: make(chan watch.Event), stop: make(chan struct{}), finished: make(chan struct{})}
	go w.forward()
	return w
}

// finish asks the stream to deliver events and end. It reports false if
// the stream has already ended (or been finished): nothing will be sent.
func (w *gateWatch) finish(events []watch.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended || w.final != nil {
		return false
	}
	w.final = events
	close(w.finished)
	return true
}

// end marks the stream ended unless it was finished; it reports whether
// final events are to be sent.
func (w *gateWatch) end() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	return w.final != nil
}

func (w *gateWatch) forward() {
	defer close(w.result)
	if w.inner != nil {
		defer w.inner.Stop()
	}
	defer func() {
		if !w.end() {
			return
		}
		for _, ev := range w.final {
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	for i, ev := range w.prefix {
		select {
		case w.result <- ev:
			w.prefix[i] = watch.Event{} // let the object go
		case <-w.stop:
			if w.interrupted != nil {
				w.interrupted()
			}
			return
		case <-w.finished:
			if w.interrupted != nil {
				w.interrupted()
			}
			return
		}
	}
	w.prefix = nil
	if w.inner == nil {
		return
	}
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case <-w.finished:
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			case <-w.finished:
				return
			}
		}
	}
}

func (w *gateWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *gateWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// gateClosed: the resource stopped being served. If a watch stream is
// open, it is finished with a delete per cached object (see removalWatch);
// otherwise the next Watch does that.
func (lw *gatedListerWatcher) gateClosed(reason string) {
	lw.mu.Lock()
	w, _ := lw.activeWatch.(*gateWatch)
	lw.activeWatch = nil
	finished := false
	if w != nil && lw.listedOnce && !lw.lastSynthetic {
		if finished = w.finish(lw.removalEvents()); finished {
			lw.lastSynthetic, lw.listedOnce = true, false
		}
	}
	lw.mu.Unlock()
	if finished {
		lw.hooks.emptied(reason)
	} else if w != nil {
		w.Stop()
	}
}

// relist makes the reflector drop its watch and list again (the informer
// now follows another version): the open stream ends with "expired".
func (lw *gatedListerWatcher) relist() {
	lw.mu.Lock()
	lw.forceRelist = true
	w, _ := lw.activeWatch.(*gateWatch)
	lw.activeWatch = nil
	lw.mu.Unlock()
	if w != nil {
		expired := apierrors.NewResourceExpired("informerkit: relisting at a new version").Status()
		if !w.finish([]watch.Event{{Type: watch.Error, Object: &expired}}) {
			w.Stop()
		}
	}
}

func metaListRV(obj runtime.Object) (string, error) {
	type rvGetter interface{ GetResourceVersion() string }
	if l, ok := obj.(rvGetter); ok {
		return l.GetResourceVersion(), nil
	}
	return "", errors.New("no list metadata")
}

// List implements the deprecated toolscache.Lister; the reflector uses
// ListWithContext.
func (lw *gatedListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements the deprecated toolscache.Watcher; the reflector uses
// WatchWithContext.
func (lw *gatedListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported tells the reflector whether the client
// behind the informer can stream lists (client-go's watchlist contract).
func (lw *gatedListerWatcher) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }
