package dynamicinformer

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/genericlister"
)

// InformerHandle is a handle on a shared informer. It has client-go's
// informers.GenericInformer method set (Informer, Lister) plus status,
// handlers with recovered panics, and Release. Methods are safe for
// concurrent use.
type InformerHandle struct {
	e        *entry
	release  func(*entry)
	released atomic.Bool
	resync   time.Duration // WithResyncPeriod of this handle
}

// Informer is the shared client-go informer. Handlers added to it stay
// with it across CRD removal and re-installation. Do not call Run on it:
// the factory runs it.
func (h *InformerHandle) Informer() toolscache.SharedIndexInformer { return h.e.informer }

// Lister reads the informer's cache (client-go's GenericLister). Returned
// objects are shared with the cache: do not mutate them.
func (h *InformerHandle) Lister() toolscache.GenericLister {
	return genericlister.NewGeneric(h.e.informer.GetIndexer(), h.e.currentGVR().GroupResource())
}

// UnstructuredLister returns informerkit's lister over the cache (label
// indexes, field queries, typed views). For MetadataOnly projections it
// reads *metav1.PartialObjectMetadata.
func (h *InformerHandle) UnstructuredLister() *genericlister.Lister {
	return genericlister.New(h.e.informer.GetIndexer(), h.e.currentGVR().GroupResource())
}

// GVR is the resource the informer watches. For an informer obtained by
// ForName without a version, the version changes when the informer
// follows a new preferred version (see ForName).
func (h *InformerHandle) GVR() schema.GroupVersionResource { return h.e.currentGVR() }

// Status is a snapshot of the informer's state.
func (h *InformerHandle) Status() Status { return h.e.status() }

// HasSynced reports whether the informer's state has been Synced at least
// once: it turns true when the Synced status is recorded (so Status reads
// Synced or a later state), and stays true (through Removed and back).
func (h *InformerHandle) HasSynced() bool {
	select {
	case <-h.e.synced:
		return true
	default:
		return false
	}
}

// Release says this handle is done. When every handle of an informer has
// been released the informer stops and its cache is dropped (its handlers
// get no further events). Release does not wait for the informer's
// goroutines (Factory.Shutdown does), so it may be called from the
// informer's own event handler. Calling it again is a no-op.
func (h *InformerHandle) Release() {
	if h.released.CompareAndSwap(false, true) && h.release != nil {
		h.release(h.e)
	}
}

// AddEventHandler adds handler to the shared informer, recovering its
// panics (see eventhandler.RecoverPanics): each panic is counted in
// Status.HandlerPanics, the last one is Status.LastHandlerPanic (an
// *eventhandler.PanicError), and the first panic of each handler is
// logged — later ones are only counted. A nil handler is ErrNilHandler
// (client-go would accept it and crash on the first event). Handlers
// added with Informer().AddEventHandler are client-go's: a panic there
// crashes the process.
func (h *InformerHandle) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return h.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{})
}

// AddEventHandlerWithOptions is AddEventHandler with client-go's handler
// options (resync period, logger). Without a resync period in opts the
// handle's (WithResyncPeriod) applies.
func (h *InformerHandle) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if handler == nil {
		return nil, ErrNilHandler
	}
	if opts.ResyncPeriod == nil {
		d := h.resync
		opts.ResyncPeriod = &d
	}
	e := h.e
	var logged atomic.Bool
	return e.informer.AddEventHandlerWithOptions(eventhandler.RecoverPanics(handler, func(p *eventhandler.PanicError) {
		e.mu.Lock()
		e.panics++
		e.lastPanic = p
		e.mu.Unlock()
		e.metrics.handlerPanic()
		if logged.CompareAndSwap(false, true) {
			e.logger.Error(p, "event handler panicked; the event was skipped (later panics of this handler are counted in Status, not logged)",
				"stack", string(p.Stack))
		}
	}), opts)
}
