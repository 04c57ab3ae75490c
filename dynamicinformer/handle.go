package dynamicinformer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/genericlister"
)

// InformerHandle is one holder's reference to a shared informer. It has
// client-go's informers.GenericInformer method set (Informer, Lister) plus
// status, handlers and Release. Methods are safe for concurrent use.
//
// Handlers are added through the handle's Informer(): the handler's
// panics are recovered and counted in Status, Release removes it, and a
// relist tells it only what changed (an update whose resourceVersion did
// not change is not delivered, resyncs apart; see
// WithUnchangedRelistUpdates).
type InformerHandle struct {
	e       *entry
	release func(*entry)
	inf     *handleInformer

	mu        sync.Mutex // guards regs; held while adding, so Release cannot miss a handler
	regs      map[toolscache.ResourceEventHandlerRegistration]struct{}
	released  atomic.Bool   // set under mu
	resync    time.Duration // WithResyncPeriod of this handle
	unchanged bool          // WithUnchangedRelistUpdates of this handle
}

func newHandle(e *entry, release func(*entry)) *InformerHandle {
	h := &InformerHandle{e: e, release: release, regs: map[toolscache.ResourceEventHandlerRegistration]struct{}{}}
	h.inf = &handleInformer{SharedIndexInformer: e.informer, h: h}
	return h
}

// Informer is the shared informer as seen through this handle (the same
// value on every call; handles sharing an informer return different
// values with the same GetIndexer and GetStore). Its cache, indexer and
// sync state are the shared informer's (HasSynced: the informer has been
// Synced or Stale at least once). Its handler methods are the handle's: AddEventHandler,
// AddEventHandlerWithResyncPeriod and AddEventHandlerWithOptions recover
// panics and are removed by Release (ErrStopped after it);
// RemoveEventHandler removes a handler of this handle. The factory runs
// the informer: Run and RunWithContext start nothing, they block until
// their stop channel or context ends or the informer has stopped.
// SetTransform, SetWatchErrorHandler and SetWatchErrorHandlerWithContext
// return ErrOptionConflict (the factory owns them: use WithTransform;
// errors are in Status).
func (h *InformerHandle) Informer() toolscache.SharedIndexInformer { return h.inf }

// Lister reads the informer's cache (client-go's GenericLister). Returned
// objects are shared with the cache: do not mutate them.
func (h *InformerHandle) Lister() toolscache.GenericLister {
	return genericlister.NewGeneric(h.e.informer.GetIndexer(), h.e.currentGVR().GroupResource())
}

// GVR is the resource the informer watches. For an informer obtained by
// ForName without a version, the version changes when the informer
// follows a new preferred version (see ForName).
func (h *InformerHandle) GVR() schema.GroupVersionResource { return h.e.currentGVR() }

// Status is a snapshot of the informer's state. It counts the cache's
// objects (Status.Objects) by listing the store's keys, so a call costs
// time and memory in proportion to the cache: on a hot path (a request
// handler asking whether a cache is ready), keep the states
// Factory.OnStatusChange delivers instead.
func (h *InformerHandle) Status() Status { return h.e.status() }

// hasSynced reports whether the informer's state has been Synced (or
// Stale) at least once: it turns true when that status is recorded (so
// Status reads Synced, Stale or a later state), and stays true (through
// Stale, Removed and back).
func (h *InformerHandle) hasSynced() bool {
	select {
	case <-h.e.synced:
		return true
	default:
		return false
	}
}

// Release says this handle is done: the handlers added through it are
// removed (they get no event after Release returns, except one being
// delivered at that moment), and when every handle of the informer has
// been released the informer stops. Release does not wait for the
// informer's goroutines (Factory.Shutdown does), so it may be called from
// the informer's own event handler. Calling it again is a no-op.
//
// After Release, adding a handler returns ErrStopped, the Wait methods
// return ErrStopped, and reads (Status, Lister, the informer's
// store) keep working: they see the shared cache while other handles hold
// the informer, and its last contents once it has stopped.
func (h *InformerHandle) Release() {
	h.mu.Lock()
	if h.released.Load() {
		h.mu.Unlock()
		return
	}
	h.released.Store(true)
	regs := h.regs
	h.regs = nil
	h.mu.Unlock()
	for reg := range regs {
		_ = h.e.informer.RemoveEventHandler(reg)
	}
	if h.release != nil {
		h.release(h.e)
	}
}

// addEventHandler adds handler to the shared informer for this handle
// (Informer()'s AddEventHandler methods). Its panics are recovered: each
// is counted in Status.HandlerPanics, the last one is
// Status.LastHandlerPanic (an *eventhandler.PanicError), the first of each
// handler is logged, and the next event is delivered normally. The
// registration is client-go's (HasSynced, toolscache.ShutDownEventHandler
// work on it). A nil handler is ErrInvalid; after Release it is
// ErrStopped. Without a resync period in opts the handle's
// (WithResyncPeriod) applies. Unless the handle has
// WithUnchangedRelistUpdates, the handler is not given a relist's updates
// of unchanged objects (skipUnchanged); resyncs reach it.
func (h *InformerHandle) addEventHandler(handler toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil event handler", ErrInvalid)
	}
	if opts.ResyncPeriod == nil {
		d := h.resync
		opts.ResyncPeriod = &d
	}
	e := h.e
	if !h.unchanged {
		handler = skipUnchanged{handler}
	}
	var logged atomic.Bool
	wrapped := eventhandler.RecoverPanics(handler, func(p *eventhandler.PanicError) {
		e.mu.Lock()
		e.panics++
		e.lastPanic = p
		e.mu.Unlock()
		e.metrics.handlerPanic()
		if logged.CompareAndSwap(false, true) {
			e.logger.Error(p, "event handler panicked; the event was skipped (later panics of this handler are counted in Status, not logged)",
				"stack", string(p.Stack))
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released.Load() {
		return nil, ErrStopped
	}
	reg, err := e.informer.AddEventHandlerWithOptions(wrapped, opts)
	if err != nil {
		return nil, err
	}
	h.regs[reg] = struct{}{}
	return reg, nil
}

// removeEventHandler removes a handler added through this handle (or any
// registration of the shared informer: client-go's RemoveEventHandler).
func (h *InformerHandle) removeEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	h.mu.Lock()
	delete(h.regs, reg)
	h.mu.Unlock()
	return h.e.informer.RemoveEventHandler(reg)
}

// handleInformer is the shared informer as a handle hands it out: reads go
// to the shared informer, handler methods to the handle.
type handleInformer struct {
	toolscache.SharedIndexInformer
	h *InformerHandle
}

func (i *handleInformer) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.h.addEventHandler(handler, toolscache.HandlerOptions{})
}

func (i *handleInformer) AddEventHandlerWithResyncPeriod(handler toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.h.addEventHandler(handler, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

func (i *handleInformer) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.h.addEventHandler(handler, opts)
}

// HasSynced reports whether the informer's state has been Synced (or
// Stale) at least once (Status reads Synced, Stale or a later state); it
// stays true.
func (i *handleInformer) HasSynced() bool { return i.h.hasSynced() }

func (i *handleInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	return i.h.removeEventHandler(reg)
}

// Run blocks until stopCh is closed or the informer has stopped; the
// factory runs the informer.
func (i *handleInformer) Run(stopCh <-chan struct{}) {
	select {
	case <-stopCh:
	case <-i.h.e.done:
	}
}

// RunWithContext blocks until ctx ends or the informer has stopped; the
// factory runs the informer.
func (i *handleInformer) RunWithContext(ctx context.Context) { i.Run(ctx.Done()) }

func (i *handleInformer) SetTransform(toolscache.TransformFunc) error {
	return errFactoryOwned("SetTransform (use WithTransform)")
}

func (i *handleInformer) SetWatchErrorHandler(toolscache.WatchErrorHandler) error {
	return errFactoryOwned("SetWatchErrorHandler (errors are in Status)")
}

func (i *handleInformer) SetWatchErrorHandlerWithContext(toolscache.WatchErrorHandlerWithContext) error {
	return errFactoryOwned("SetWatchErrorHandlerWithContext (errors are in Status)")
}

func errFactoryOwned(what string) error {
	return fmt.Errorf("%w: %s is set by the informer factory", ErrOptionConflict, what)
}
