package dynamicinformer

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	return genericlister.NewGeneric(h.si.informer.GetIndexer(), h.si.currentGVR().GroupResource())
}

// UnstructuredLister returns informerkit's lister over the cache (label
// index, field indexes, typed views). Nil for MetadataOnly informers.
func (h *InformerHandle) UnstructuredLister() *genericlister.Lister {
	if h.si.cfg.metadataOnly {
		return nil
	}
	return genericlister.New(h.si.informer.GetIndexer(), h.si.currentGVR().GroupResource())
}

// GVR is the resource the informer watches. For an informer obtained by
// ForName without a version, the version changes when the informer
// follows a new preferred version (see ForName).
func (h *InformerHandle) GVR() schema.GroupVersionResource { return h.si.currentGVR() }

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
	factory *factory
	key     string
	gvr     atomic.Pointer[schema.GroupVersionResource] // the resource watched now; see currentGVR
	// follow: obtained by name without a version; when its version stops
	// being served the informer moves to the preferred one (presence).
	follow   bool
	cfg      resourceConfig
	informer toolscache.SharedIndexInformer
	lw       *gatedListerWatcher
	gate     *gate
	logger   logr.Logger

	refs int // guarded by factory.mu

	cancel context.CancelFunc // set when started; guarded by factory.mu
	done   chan struct{}      // closed when the informer's goroutines end

	mu           sync.Mutex // guards the status fields below
	state        State
	err          error
	reason       string
	since        time.Time
	everSynced   bool
	awaitRelist  bool // a removal or version switch happened; Synced again after a real relist
	relisted     bool // that relist returned, at relistRV
	relistRV     string
	removal      string        // why the resource was removed, until the cache is empty and Removed published
	removalSince time.Time     // when removal was set
	lastErrKind  error         // to log an error class once, not on every retry
	wake         chan struct{} // nudges the sync monitor

	// Guarded by mu too: panics recovered from AddEventHandler handlers.
	handlerPanics int64
	lastPanic     *HandlerPanicError
}

func newSharedInformer(f *factory, key string, gvr schema.GroupVersionResource, cfg resourceConfig, open bool) (*sharedInformer, error) {
	si := &sharedInformer{
		factory: f, key: key, cfg: cfg,
		gate:   newGate(open),
		logger: f.cfg.logger.WithValues("gvr", gvr.String()),
		state:  Pending, reason: "not started", since: time.Now(),
		done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	si.gvr.Store(&gvr)
	var funcs listWatchFuncs
	var client any
	var example runtime.Object
	var empty func(rv string, items []runtime.Object) (runtime.Object, error)
	if cfg.metadataOnly {
		if f.cfg.metadataClient == nil {
			return nil, ErrMetadataClientMissing
		}
		funcs = metadataFuncs(f.cfg.metadataClient, si.currentGVR)
		client = f.cfg.metadataClient
		example = &metav1.PartialObjectMetadata{}
		empty = metadataList
	} else {
		funcs = dynamicFuncs(f.client, si.currentGVR)
		client = f.client
		example = &unstructured.Unstructured{}
		empty = unstructuredList(si.currentGVR)
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
		idleTimeout: watchIdleTimeout(f.cfg.watchIdle, cfg),
		emptyList:   func(rv string) runtime.Object { o, _ := empty(rv, nil); return o },
		cached:      func() []interface{} { return si.informer.GetStore().List() },
		asWatched:   asWatched(cfg.metadataOnly),
		bookmark:    bookmarkObject(cfg.metadataOnly),
	}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	if cfg.labelIndex == nil || *cfg.labelIndex {
		for k, v := range ikcache.AutoLabelKeyIndexers() {
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

// asWatched returns a function that turns a cached object into a copy of
// the type the informer's reflector expects, for the deletes the gate
// delivers when a resource stops being served: cached objects are shared
// and transforms may mutate what they receive. A cached object of another
// type (a transform changed it) is decoded if it can be (cache.Compact),
// else reduced to its metadata. nil means the object cannot be described.
func asWatched(metadataOnly bool) func(obj interface{}) runtime.Object {
	return func(obj interface{}) runtime.Object {
		switch o := obj.(type) {
		case *metav1.PartialObjectMetadata:
			if metadataOnly {
				return o.DeepCopy()
			}
		case *unstructured.Unstructured:
			if !metadataOnly {
				return o.DeepCopy()
			}
		case interface {
			Decode() (*unstructured.Unstructured, error)
		}:
			if u, err := o.Decode(); err == nil && !metadataOnly {
				return u
			}
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil
		}
		om := metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), Labels: m.GetLabels(), OwnerReferences: m.GetOwnerReferences()}
		if metadataOnly {
			return &metav1.PartialObjectMetadata{ObjectMeta: om}
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetNamespace(om.Namespace)
		u.SetName(om.Name)
		u.SetUID(om.UID)
		u.SetResourceVersion(om.ResourceVersion)
		u.SetLabels(om.Labels)
		u.SetOwnerReferences(om.OwnerReferences)
		return u
	}
}

// bookmarkObject builds bookmark event objects of the reflector's type.
func bookmarkObject(metadataOnly bool) func(rv string) runtime.Object {
	return func(rv string) runtime.Object {
		if metadataOnly {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetResourceVersion(rv)
		return u
	}
}

// currentGVR is the resource the informer lists and watches now.
func (si *sharedInformer) currentGVR() schema.GroupVersionResource { return *si.gvr.Load() }

// switchVersion makes a following informer list and watch version v of its
// group-resource from now on: the current watch ends and the reflector
// relists at v, so handlers see an update per object that still exists
// (with its new apiVersion), a delete per object that does not, and an add
// per new one. The state is Syncing until that list has been taken in.
func (si *sharedInformer) switchVersion(v, reason string) {
	old := si.currentGVR()
	if old.Version == v {
		return
	}
	gvr := old.GroupResource().WithVersion(v)
	si.gvr.Store(&gvr)
	si.logger.Info("following the preferred version", "from", old.Version, "to", v, "reason", reason)
	si.mu.Lock()
	si.awaitRelist, si.relisted = true, false
	if si.state == Synced || si.state == Syncing || si.state == Removed {
		si.setStateLocked(Syncing, nil, "following version "+v+": "+reason)
	}
	si.mu.Unlock()
	si.lw.relist()
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
// the reflector has adopted the real list that followed (its last-synced
// resourceVersion reached that list's).
func (si *sharedInformer) monitorSync(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		si.mu.Lock()
		syncing := si.state == Syncing
		await, listed, listRV := si.awaitRelist, si.relisted, si.relistRV
		removal, removalSince := si.removal, si.removalSince
		si.mu.Unlock()
		// Removed once the cache is empty, or (objects whose deletes were
		// lost with a stopped stream; they go when the resource returns)
		// after removalGrace.
		if removal != "" && (si.cacheEmpty() || time.Since(removalSince) > removalGrace) {
			si.mu.Lock()
			if si.removal == removal {
				si.removal = ""
				si.setStateLocked(Removed, &InformerError{GVR: si.currentGVR(), Kind: ErrNotServed, Err: errors.New(removal)}, removal)
			}
			si.mu.Unlock()
			removal = ""
		}
		if syncing && si.informer.HasSynced() && (!await || listed && rvReached(si.informer.LastSyncResourceVersion(), listRV)) {
			si.mu.Lock()
			if si.state == Syncing {
				si.everSynced = true
				si.awaitRelist, si.relisted = false, false
				si.setStateLocked(Synced, nil, "")
			}
			si.mu.Unlock()
		}
		if syncing || removal != "" {
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

// cacheEmpty reports whether the cache holds no object, without listing
// its keys (it is polled while a removal drains): the namespace index,
// always installed, drops a value when its last object goes.
func (si *sharedInformer) cacheEmpty() bool {
	values := si.informer.GetIndexer().ListIndexFuncValues(toolscache.NamespaceIndex)
	return len(values) == 0
}

// removalGrace bounds how long Removed waits for the cache to empty.
const removalGrace = 5 * time.Second

// rvReached reports whether the reflector's last-synced resourceVersion
// has reached want (etcd's are integers; others: any real one other than
// the synthetic one).
func rvReached(last, want string) bool {
	if last == "" || last == syntheticRV {
		return false
	}
	l, err1 := strconv.ParseUint(last, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	return l >= w
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
		GVR:           si.currentGVR(),
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
	if si.state == Pending || si.state == Removed || si.removal != "" {
		si.removal = "" // served again before the removal was published
		si.setStateLocked(Syncing, nil, "listing")
	}
}

func (si *sharedInformer) listSucceeded(rv string) {
	si.mu.Lock()
	if si.state != Synced {
		si.setStateLocked(Syncing, nil, "listed")
	}
	if si.awaitRelist {
		// A removal or a version switch waits for this real list.
		si.relisted, si.relistRV = true, rv
	}
	si.lastErrKind = nil
	si.mu.Unlock()
	si.nudge()
}

func (si *sharedInformer) notFound(err error) {
	si.logger.V(2).Info("resource not found on the server; waiting for it to be served", "err", err.Error())
	si.factory.presence.observedNotFound(si.currentGVR())
}

// emptied: the gate answered the synthetic empty list. Removed is
// published by the sync monitor once the cache is empty, so that a caller
// told "Removed" finds the cache empty.
func (si *sharedInformer) emptied(reason string) {
	si.mu.Lock()
	si.awaitRelist, si.relisted = true, false
	si.removal, si.removalSince = reason, time.Now()
	si.mu.Unlock()
	si.nudge()
}

// refineRemoval: the gate, already closed, learned why from an
// authoritative source (the CRD's versions, discovery) after a bare 404
// closed it. A removal not yet published, or a published Removed status,
// takes the new reason; nothing else changes.
func (si *sharedInformer) refineRemoval(reason string) {
	if reason == "" {
		return
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	switch {
	case si.removal != "":
		si.removal = reason
	case si.state == Removed && si.reason != reason:
		si.setStateLocked(Removed, &InformerError{GVR: si.currentGVR(), Kind: ErrNotServed, Err: errors.New(reason)}, reason)
	}
}

// silent: the liveness bound ran out; the next list is a probe.
func (si *sharedInformer) silent(idle time.Duration, where string) {
	si.logger.V(2).Info("nothing from the server; relisting to check it", "idle", idle.String(), "where", where)
}

// watchIdleTimeout is the liveness bound of an informer: the factory's,
// except for informers over several namespaces (their merged watch asks
// for no bookmarks, so a quiet one would be probed every period, and each
// of their watch restarts relists anyway).
func watchIdleTimeout(d time.Duration, cfg resourceConfig) time.Duration {
	if d <= 0 || len(cfg.namespaces) > 1 {
		return 0
	}
	return d
}

func (si *sharedInformer) waiting(reason string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.state == Removed || si.removal != "" {
		return
	}
	full := "waiting for the resource to be served: " + reason
	if si.state == Pending && si.reason == full {
		return // a blocked List started again: nothing new to publish
	}
	// Err says why, typed, so callers need not parse Reason.
	si.setStateLocked(Pending, &InformerError{GVR: si.currentGVR(), Kind: ErrNotServed, Err: errors.New(reason)}, full)
}

// watchErrorHandler replaces client-go's default (which logs every
// failure): it records the error, typed, in the status, and logs a class
// of error once until it changes.
func (si *sharedInformer) watchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	if err == nil || errors.Is(err, errNotServedFallback) || errors.Is(err, errProbeFallback) || errors.Is(err, context.Canceled) {
		return
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return // a relist follows; not a failure
	}
	ie := classify(si.currentGVR(), err)
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
	case si.state == Failed && si.err != nil && si.err.Error() == ie.Error():
		// The same failure again (each retry carries a new error value):
		// keep the status, and its Since, as published.
	default:
		si.setStateLocked(Failed, ie, kind.Error())
	}
}
