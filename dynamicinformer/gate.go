package dynamicinformer

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// informer quiet: before the first successful list, List blocks (Pending);
// after it, List returns an empty list once, so the reflector's Replace
// deletes every cached object (Removed), and Watch blocks until the gate
// opens and then ends with "expired", so the reflector relists from the
// server. One mechanism covers "not installed yet", "deleted" and
// "installed again", keeping the same client-go informer and its handlers.
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
func (g *gate) set(open bool, reason string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !open {
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
	// listFailed: a list or watch failed (not 404).
	requestFailed(err error)
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
	// noWatchList is true when the client cannot stream lists (client-go's
	// fake clients); the reflector then uses list+watch.
	noWatchList bool

	mu            sync.Mutex // guards listedOnce, lastSynthetic, activeWatch
	listedOnce    bool       // a real list has succeeded since the informer started
	lastSynthetic bool       // the last list answered was the synthetic empty one
	activeWatch   watch.Interface
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
		if lw.lastSynthetic {
			// The reflector would ask for "not older than" our synthetic
			// version; ask the server for a fresh consistent list instead.
			opts.ResourceVersion = ""
			opts.ResourceVersionMatch = ""
		}
		lw.mu.Unlock()
		lw.hooks.listStarted()
		obj, err := lw.inner.ListWithContext(ctx, opts)
		if err != nil {
			if apierrors.IsNotFound(err) {
				lw.hooks.notFound(err) // closes the gate
				continue
			}
			lw.hooks.requestFailed(err)
			return nil, err
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

func (lw *gatedListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	watchList := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	open, _, _ := lw.gate.state()
	lw.mu.Lock()
	synthetic, listed := lw.lastSynthetic, lw.listedOnce
	lw.mu.Unlock()
	switch {
	case watchList && (!open || synthetic):
		return nil, errNotServedFallback
	case !open && !synthetic && listed:
		// The cache holds objects of a resource no longer served: relist,
		// which answers the empty list.
		return nil, apierrors.NewResourceExpired("informerkit: resource no longer served")
	case !open || synthetic:
		if err := lw.gate.waitOpen(ctx); err != nil {
			return nil, err
		}
		return nil, apierrors.NewResourceExpired("informerkit: resource served again")
	}
	if watchList {
		lw.hooks.listStarted()
	}
	w, err := lw.inner.WatchWithContext(ctx, opts)
	if err != nil {
		if apierrors.IsNotFound(err) {
			lw.hooks.notFound(err)
		} else {
			lw.hooks.requestFailed(err)
		}
		return nil, err
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
	gw := newGateWatch(w)
	lw.mu.Lock()
	lw.activeWatch = gw
	lw.mu.Unlock()
	return gw, nil
}

// gateWatch forwards a server watch. When the gate closes it ends the
// stream cleanly (a closed channel, not an error), so the reflector comes
// back to the gate without logging a failure.
type gateWatch struct {
	inner  watch.Interface
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func newGateWatch(inner watch.Interface) *gateWatch {
	w := &gateWatch{inner: inner, result: make(chan watch.Event), stop: make(chan struct{})}
	go w.forward()
	return w
}

func (w *gateWatch) forward() {
	defer close(w.result)
	defer w.inner.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		}
	}
}

func (w *gateWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *gateWatch) Stop() { w.once.Do(func() { close(w.stop) }) }

// stopWatch ends the current watch (if any) so the reflector comes back to
// the gate; called when the gate closes.
func (lw *gatedListerWatcher) stopWatch() {
	lw.mu.Lock()
	w := lw.activeWatch
	lw.activeWatch = nil
	lw.mu.Unlock()
	if w != nil {
		w.Stop()
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
