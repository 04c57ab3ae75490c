package dynamicinformer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/genericlister"
)

// GenericInformer is a handle on a shared informer. It has client-go's
// informers.GenericInformer method set plus Release.
type GenericInformer interface {
	// Informer is the shared client-go informer. Handlers added to it stay
	// with it across CRD removal and re-installation. Do not call Run on
	// it: the factory runs it.
	Informer() toolscache.SharedIndexInformer
	// Lister reads the informer's cache (client-go's GenericLister).
	// Returned objects are shared with the cache: do not mutate them.
	Lister() toolscache.GenericLister
	// Release says this handle is done. When every handle of an informer
	// has been released the informer stops and its cache is dropped (its
	// handlers get no further events). Calling Release again is a no-op.
	Release()
}

// InformerHandle is the concrete GenericInformer the factory returns. It
// adds what client-go's interface cannot carry.
type InformerHandle struct {
	si       *sharedInformer
	released atomic.Bool
}

var _ GenericInformer = (*InformerHandle)(nil)

// Informer implements GenericInformer.
func (h *InformerHandle) Informer() toolscache.SharedIndexInformer { return h.si.informer }

// Lister implements GenericInformer.
func (h *InformerHandle) Lister() toolscache.GenericLister {
	return genericlister.NewGeneric(h.si.informer.GetIndexer(), h.si.gvr.GroupResource())
}

// UnstructuredLister returns informerkit's lister over the cache (label
// index, field indexes, typed views). Nil for MetadataOnly informers.
func (h *InformerHandle) UnstructuredLister() *genericlister.Lister {
	if h.si.cfg.metadataOnly {
		return nil
	}
	return genericlister.New(h.si.informer.GetIndexer(), h.si.gvr.GroupResource())
}

// GVR is the resource the informer watches.
func (h *InformerHandle) GVR() schema.GroupVersionResource { return h.si.gvr }

// Status is a snapshot of the informer's state.
func (h *InformerHandle) Status() Status { return h.si.status() }

// HasSynced reports whether the informer's cache is complete (its state is
// Synced, or Removed after having synced).
func (h *InformerHandle) HasSynced() bool { return h.si.informer.HasSynced() }

// Release implements GenericInformer.
func (h *InformerHandle) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.si.factory.release(h.si)
	}
}

// sharedInformer is one client-go informer and everything the factory
// keeps about it.
type sharedInformer struct {
	factory  *factory
	key      string
	gvr      schema.GroupVersionResource
	cfg      resourceConfig
	informer toolscache.SharedIndexInformer
	lw       *gatedListerWatcher
	gate     *gate
	logger   logr.Logger

	refs int // guarded by factory.mu

	cancel context.CancelFunc // set when started; guarded by factory.mu
	done   chan struct{}      // closed when the informer's goroutines end

	mu          sync.Mutex // guards the status fields below
	state       State
	err         error
	reason      string
	since       time.Time
	everSynced  bool
	awaitRelist bool          // a removal happened; Synced again after a real relist
	lastErrKind error         // to log an error class once, not on every retry
	wake        chan struct{} // nudges the sync monitor

	// Guarded by mu too: panics recovered from AddEventHandler handlers.
	handlerPanics int64
	lastPanic     *HandlerPanicError
}

func newSharedInformer(f *factory, key string, gvr schema.GroupVersionResource, cfg resourceConfig, open bool) (*sharedInformer, error) {
	si := &sharedInformer{
		factory: f, key: key, gvr: gvr, cfg: cfg,
		gate:   newGate(open),
		logger: f.cfg.logger.WithValues("gvr", gvr.String()),
		state:  Pending, reason: "not started", since: time.Now(),
		done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	var funcs listWatchFuncs
	var client any
	var example runtime.Object
	var empty func(rv string, items []runtime.Object) (runtime.Object, error)
	if cfg.metadataOnly {
		if f.cfg.metadataClient == nil {
			return nil, ErrMetadataClientMissing
		}
		funcs = metadataFuncs(f.cfg.metadataClient, gvr)
		client = f.cfg.metadataClient
		example = &metav1.PartialObjectMetadata{}
		empty = metadataList
	} else {
		funcs = dynamicFuncs(f.client, gvr)
		client = f.client
		example = &unstructured.Unstructured{}
		empty = unstructuredList(gvr)
	}
	var inner toolscache.ListerWatcherWithContext
	if len(cfg.namespaces) > 1 {
		inner = &multiNamespaceListerWatcher{funcs: funcs, namespaces: cfg.namespaces, cfg: cfg, emptyList: empty}
	} else {
		ns := ""
		if len(cfg.namespaces) == 1 {
			ns = cfg.namespaces[0]
		}
		inner = &optionsListerWatcher{funcs: funcs, ns: ns, cfg: cfg}
	}
	si.lw = &gatedListerWatcher{
		inner: inner, gate: si.gate, hooks: si,
		noWatchList: len(cfg.namespaces) > 1 || watchlist.DoesClientNotSupportWatchListSemantics(client),
		emptyList:   func(rv string) runtime.Object { o, _ := empty(rv, nil); return o },
	}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	if cfg.labelIndex == nil || *cfg.labelIndex {
		for k, v := range ikcache.LabelIndexers() {
			indexers[k] = v
		}
	}
	for k, v := range cfg.indexers {
		indexers[k] = v
	}
	resync := time.Duration(0)
	if cfg.resync != nil {
		resync = *cfg.resync
	}
	si.informer = toolscache.NewSharedIndexInformerWithOptions(si.lw, example, toolscache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          indexers,
		ObjectDescription: gvr.String(),
	})
	if cfg.transform != nil {
		if err := si.informer.SetTransform(cfg.transform); err != nil {
			return nil, err
		}
	}
	if err := si.informer.SetWatchErrorHandlerWithContext(si.watchErrorHandler); err != nil {
		return nil, err
	}
	return si, nil
}

// run runs the informer until ctx ends; the caller waits on si.done.
func (si *sharedInformer) run(ctx context.Context) {
	defer close(si.done)
	ctx = logr.NewContext(ctx, si.logger)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		si.monitorSync(ctx)
	}()
	si.informer.RunWithContext(ctx)
	wg.Wait()
	si.setState(Stopped, nil, "stopped")
}

// monitorSync moves the state to Synced once the cache holds a complete
// list: on the first sync when HasSynced turns true; after a removal when
// the reflector has adopted a real list (its last-synced resourceVersion is
// no longer the synthetic one).
func (si *sharedInformer) monitorSync(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		si.mu.Lock()
		syncing := si.state == Syncing
		si.mu.Unlock()
		if syncing && si.informer.HasSynced() {
			si.mu.Lock()
			await := si.awaitRelist
			si.mu.Unlock()
			if !await || si.informer.LastSyncResourceVersion() != syntheticRV {
				si.mu.Lock()
				if si.state == Syncing {
					si.everSynced = true
					si.awaitRelist = false
					si.setStateLocked(Synced, nil, "")
				}
				si.mu.Unlock()
			}
		}
		if syncing {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-si.wake:
		}
	}
}

func (si *sharedInformer) nudge() {
	select {
	case si.wake <- struct{}{}:
	default:
	}
}

func (si *sharedInformer) setState(s State, err error, reason string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.setStateLocked(s, err, reason)
}

// setStateLocked records a state and publishes it if anything changed.
// si.mu must be held.
func (si *sharedInformer) setStateLocked(s State, err error, reason string) {
	if si.state == Stopped {
		return
	}
	if si.state == s && si.err == err && si.reason == reason {
		return
	}
	if si.state != s {
		si.since = time.Now()
		si.logger.V(2).Info("informer state", "state", s, "reason", reason)
	}
	si.state, si.err, si.reason = s, err, reason
	si.factory.notifier.publish(si.statusLocked())
}

func (si *sharedInformer) statusLocked() Status {
	st := Status{
		GVR:           si.gvr,
		Namespaces:    append([]string(nil), si.cfg.namespaces...),
		LabelSelector: si.cfg.labelSelector,
		FieldSelector: si.cfg.fieldSelector,
		MetadataOnly:  si.cfg.metadataOnly,
		State:         si.state,
		Err:           si.err,
		Reason:        si.reason,
		Since:         si.since,
		Objects:       len(si.informer.GetStore().ListKeys()),
		HandlerPanics: si.handlerPanics,
	}
	if si.lastPanic != nil {
		st.LastHandlerPanic = si.lastPanic
	}
	return st
}

func (si *sharedInformer) status() Status {
	si.mu.Lock()
	defer si.mu.Unlock()
	return si.statusLocked()
}

// gateHooks, called by the gated ListerWatcher.

func (si *sharedInformer) listStarted() {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.state == Pending || si.state == Removed {
		si.setStateLocked(Syncing, nil, "listing")
	}
}

func (si *sharedInformer) listSucceeded(string) {
	si.mu.Lock()
	if si.state != Synced {
		si.setStateLocked(Syncing, nil, "listed")
	}
	si.lastErrKind = nil
	si.mu.Unlock()
	si.nudge()
}

func (si *sharedInformer) requestFailed(err error) {
	// Recorded by the watch error handler, which sees every error the
	// reflector acts on; nothing to do here.
}

func (si *sharedInformer) notFound(err error) {
	si.logger.V(2).Info("resource not found on the server; waiting for it to be served", "err", err.Error())
	si.factory.presence.observedNotFound(si.gvr)
}

func (si *sharedInformer) emptied(reason string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.awaitRelist = true
	si.setStateLocked(Removed, &InformerError{GVR: si.gvr, Kind: ErrNotServed, Err: errors.New(reason)}, reason)
}

func (si *sharedInformer) waiting(reason string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.state == Removed {
		return
	}
	// Err says why, typed, so callers need not parse Reason.
	si.setStateLocked(Pending, &InformerError{GVR: si.gvr, Kind: ErrNotServed, Err: errors.New(reason)},
		"waiting for the resource to be served: "+reason)
}

// watchErrorHandler replaces client-go's default (which logs every
// failure): it records the error, typed, in the status, and logs a class
// of error once until it changes.
func (si *sharedInformer) watchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	if err == nil || errors.Is(err, errNotServedFallback) || errors.Is(err, context.Canceled) {
		return
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return // a relist follows; not a failure
	}
	ie := classify(si.gvr, err)
	kind := ie.(*InformerError).Kind
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.lastErrKind != kind {
		si.lastErrKind = kind
		si.logger.V(1).Info("list/watch failed", "err", err.Error())
	}
	switch {
	case errors.Is(kind, ErrNotServed):
		// The gate handles it (Pending/Removed).
	case si.state == Synced && errors.Is(kind, ErrWatch):
		// A broken watch on a synced cache: the reflector resumes by itself.
		si.err = ie
	default:
		si.setStateLocked(Failed, ie, kind.Error())
	}
}
