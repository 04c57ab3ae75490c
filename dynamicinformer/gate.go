package dynamicinformer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

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

// errProbeFallback makes a reflector in watch-list mode fall back to a
// plain List when a liveness probe is due: a watch-list stream is served
// from the server's watch cache, which is what may be stuck.
var errProbeFallback = errors.New("informerkit: no sign of life from the server; checking with a list")

// probePageSize is the page size of a liveness probe list, client-go's
// default for its own consistent lists. A paginated consistent list is
// answered from storage when the server's watch cache is not ready
// (KEP 4568), so it reports what keeps the cache from initializing
// instead of a 429 "storage is (re)initializing".
const probePageSize = 500

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
	// silent: nothing came from the server for the idle timeout; the
	// informer relists to check (see gatedListerWatcher.idleTimeout).
	silent(idle time.Duration, where string)
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
	// idleTimeout is the liveness bound (0: off). When nothing has come
	// from the server for that long — no event or bookmark on the open
	// stream, or a watch request that has not been answered (client-go
	// retries 429s inside one request) — the stream ends with "expired"
	// and the next list is a probe: a consistent, paginated list that
	// stays due until one succeeds. A server that cannot serve the
	// resource any more (e.g. its watch cache cannot initialize) then
	// answers with its error, which the reflector's error handler
	// reports; a healthy one answers with a list, at most once per idle
	// period. See WithWatchIdleTimeout.
	idleTimeout time.Duration
	// lastLife is when the server last showed life (see alive): a list or
	// watch request answered, an event or bookmark received (streams
	// publish theirs when they end).
	lastLife atomic.Int64

	mu            sync.Mutex      // guards listedOnce, lastSynthetic, forceRelist, probe, activeWatch
	listedOnce    bool            // a real list has succeeded since the informer started
	lastSynthetic bool            // the last list answered was the synthetic empty one
	forceRelist   bool            // the next watch must give way to a fresh list (relist)
	probe         bool            // a liveness probe list is due (cleared by a successful list)
	activeWatch   watch.Interface // the open stream, finished when the gate closes
}

var _ toolscache.ListerWatcherWithContext = (*gatedListerWatcher)(nil)

func (lw *gatedListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		// A later page of a paginated list: the gate was checked on page one.
		if opts.Limit == 0 {
			opts.Limit = probePageSize // the first page was a probe's
		}
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
		if lw.lastSynthetic || lw.forceRelist || lw.probe {
			// The reflector would ask for "not older than" our synthetic
			// version (or the old version's, or the one a silent watch
			// stopped at, which the server's watch cache answers from
			// whatever state it is stuck in); ask the server for a fresh
			// consistent list instead.
			opts.ResourceVersion = ""
			opts.ResourceVersionMatch = ""
			lw.forceRelist = false
			if lw.probe && opts.Limit == 0 {
				opts.Limit = probePageSize
			}
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
		lw.probe = false
		lw.mu.Unlock()
		lw.alive(time.Now())
		lw.hooks.listSucceeded(rv)
		return obj, nil
	}
}

// monoBase anchors lastLife to the monotonic clock.
var monoBase = time.Now()

// alive records that the server showed life at t.
func (lw *gatedListerWatcher) alive(t time.Time) {
	n := int64(t.Sub(monoBase)) + 1 // 0 means never
	for {
		old := lw.lastLife.Load()
		if old >= n || lw.lastLife.CompareAndSwap(old, n) {
			return
		}
	}
}

// idleLeft is how long the server may stay silent from now before a
// liveness probe is due (<= 0: due now). Before the server first
// answered it is a full idleTimeout (0 when the bound is off).
func (lw *gatedListerWatcher) idleLeft(now time.Time) time.Duration {
	last := lw.lastLife.Load()
	if lw.idleTimeout <= 0 || last == 0 {
		return lw.idleTimeout
	}
	return lw.idleTimeout - (now.Sub(monoBase) - time.Duration(last-1))
}

// probeDue reports whether a liveness probe is due, and marks it due if
// the server has been silent for the idle timeout.
func (lw *gatedListerWatcher) probeDue() bool {
	if lw.idleTimeout <= 0 {
		return false
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !lw.probe && lw.listedOnce && !lw.lastSynthetic && lw.idleLeft(time.Now()) <= 0 {
		lw.probe = true
	}
	return lw.probe
}

// startProbe marks a liveness probe due because nothing came from the
// server for the idle timeout (where: on the open stream or while a watch
// request waited) and returns the error that makes the reflector list.
func (lw *gatedListerWatcher) startProbe(watchList bool, where string) error {
	lw.mu.Lock()
	lw.probe = true
	lw.mu.Unlock()
	lw.hooks.silent(lw.idleTimeout, where)
	return probeError(watchList)
}

func probeError(watchList bool) error {
	if watchList {
		return errProbeFallback
	}
	return apierrors.NewResourceExpired("informerkit: no sign of life from the server; relisting")
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
	if open && lw.probeDue() {
		// A probe is due (the server was silent, or the last probe
		// failed): list instead of watching.
		return nil, probeError(watchList)
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
	w, release, err := lw.openWatch(ctx, opts)
	if errors.Is(err, errIdleOpen) {
		return nil, lw.startProbe(watchList, "waiting for a watch request to be answered")
	}
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
	return lw.track(lw.serverWatch(nil, w, release, nil)), nil
}

// errIdleOpen: a watch request was not answered within the idle timeout.
var errIdleOpen = errors.New("informerkit: watch request not answered within the idle timeout")

// openWatch sends the watch request. With an idle timeout, a request not
// answered before the server has been silent for that long is cancelled
// (errIdleOpen): client-go retries 429 answers inside one request, honouring
// Retry-After, for minutes. release must be called once the stream is done.
func (lw *gatedListerWatcher) openWatch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, func(), error) {
	if lw.idleTimeout <= 0 {
		w, err := lw.inner.WatchWithContext(ctx, opts)
		return w, func() {}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool
	left := max(lw.idleLeft(time.Now()), 0)
	bound := time.AfterFunc(left, func() {
		timedOut.Store(true)
		cancel()
	})
	w, err := lw.inner.WatchWithContext(wctx, opts)
	if !bound.Stop() && timedOut.Load() && ctx.Err() == nil {
		if w != nil {
			w.Stop()
		}
		cancel()
		return nil, nil, errIdleOpen
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	lw.alive(time.Now())
	return w, cancel, nil
}

// serverWatch wraps a server stream (after prefix events) with the
// liveness bound: when the stream has been silent for the idle timeout it
// ends with "expired" and a probe is due.
func (lw *gatedListerWatcher) serverWatch(prefix []watch.Event, inner watch.Interface, release func(), interrupted func()) *gateWatch {
	w := &gateWatch{prefix: prefix, inner: inner, interrupted: interrupted, release: release}
	if inner != nil && lw.idleTimeout > 0 {
		w.idle = lw.idleTimeout
		w.onIdle = func() { lw.startProbe(false, "on the open watch") }
		w.lastEvent = lw.alive
	}
	return w.start()
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
			var release func()
			if w, release, err = lw.openWatch(ctx, wopts); errors.Is(err, errIdleOpen) {
				// Listed, but the watch request was not answered: the
				// next watch refills the cache again from a new list.
				lw.hooks.silent(lw.idleTimeout, "waiting for a watch request to be answered")
				return nil, probeError(false)
			} else if err == nil {
				lw.mu.Lock()
				lw.listedOnce, lw.lastSynthetic, lw.forceRelist, lw.probe = true, false, false, false
				lw.mu.Unlock()
				lw.alive(time.Now())
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
				return lw.track(lw.serverWatch(events, w, release, func() {
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
// before all of prefix went out. With idle set, a server stream that
// delivers nothing for that long (waiting on the server, not on the
// consumer) ends with the error event onIdle returns; lastEvent, if set,
// is told when the last server event came when the stream ends. release,
// if set, is called once the server stream is stopped.
type gateWatch struct {
	prefix      []watch.Event
	inner       watch.Interface
	interrupted func()
	release     func()
	idle        time.Duration
	onIdle      func()
	lastEvent   func(time.Time)
	result      chan watch.Event
	stop        chan struct{} // closed by Stop (the consumer)
	stopOnce    sync.Once
	finished    chan struct{} // closed by finish

	mu    sync.Mutex // guards final, ended
	final []watch.Event
	ended bool // forward returned or committed to return without final
}

func newGateWatch(prefix []watch.Event, inner watch.Interface, interrupted func()) *gateWatch {
	w := &gateWatch{prefix: prefix, inner: inner, interrupted: interrupted}
	return w.start()
}

func (w *gateWatch) start() *gateWatch {
	w.result, w.stop, w.finished = make(chan watch.Event), make(chan struct{}), make(chan struct{})
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
		defer func() {
			w.inner.Stop()
			if w.release != nil {
				w.release()
			}
		}()
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
	if w.idle <= 0 {
		w.forwardServer(nil, time.Time{}, new(time.Time))
		return
	}
	// The idle timer is not reset per event (that costs more than reading
	// the clock): when it fires early, it is re-armed for what is left.
	t := time.NewTimer(w.idle)
	defer t.Stop()
	var last time.Time // when the last server event was delivered
	w.forwardServer(t, time.Now(), &last)
	if w.lastEvent != nil && !last.IsZero() {
		w.lastEvent(last)
	}
}

// forwardServer forwards the server's events until the stream ends, is
// stopped or finished, or (t set) nothing is received for w.idle since
// from or the last event.
func (w *gateWatch) forwardServer(t *time.Timer, from time.Time, last *time.Time) {
	in := w.inner.ResultChan()
	var idle <-chan time.Time
	if t != nil {
		idle = t.C
	}
	for {
		select {
		case <-w.stop:
			return
		case <-w.finished:
			return
		case <-idle:
			if !last.IsZero() {
				from = *last
			}
			if left := w.idle - time.Since(from); left > 0 {
				t.Reset(left)
				continue
			}
			if w.end() {
				return // finished meanwhile: the final events go out
			}
			w.onIdle()
			status := apierrors.NewResourceExpired("informerkit: no event or bookmark from the server for " +
				w.idle.String() + "; relisting").Status()
			select {
			case w.result <- watch.Event{Type: watch.Error, Object: &status}:
			case <-w.stop:
			}
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
			if t != nil {
				*last = time.Now()
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
