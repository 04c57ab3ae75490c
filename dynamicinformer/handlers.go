package dynamicinformer

import (
	"errors"
	"fmt"
	"runtime/debug"

	toolscache "k8s.io/client-go/tools/cache"
)

// ErrHandlerPanic is what every *HandlerPanicError matches with errors.Is.
var ErrHandlerPanic = errors.New("event handler panicked")

// HandlerPanicError describes one panic recovered from an event handler.
type HandlerPanicError struct {
	// Event is "add", "update" or "delete".
	Event string
	// Key is the object's namespace/name key (DeletionHandlingMetaNamespaceKeyFunc).
	Key string
	// Value is what the handler panicked with.
	Value any
	// Stack is the handler goroutine's stack at the panic.
	Stack []byte
}

func (e *HandlerPanicError) Error() string {
	return fmt.Sprintf("event handler panicked on %s of %s: %v", e.Event, e.Key, e.Value)
}

// Is makes errors.Is(err, ErrHandlerPanic) true.
func (e *HandlerPanicError) Is(target error) bool { return target == ErrHandlerPanic }

// RecoverPanics returns a handler that calls h and recovers a panic in any
// of its methods: the event is skipped, report (if not nil) is called once
// with a *HandlerPanicError, synchronously, on the goroutine that called
// the handler, and the next event is delivered normally.
//
// Why: client-go delivers each handler's events on its own goroutine and
// lets a handler panic crash the process (utilruntime.HandleCrash
// re-panics unless utilruntime.ReallyCrash is false; even then client-go
// sleeps a second after each panic and, for an object of the initial
// list, never marks the handler synced). With RecoverPanics the handler's
// registration still reports HasSynced after a panic on the initial list.
//
// InformerHandle.AddEventHandler applies it for you and counts panics in
// Status; use RecoverPanics directly for handlers added straight to
// Informer() or to a Coalescing handler's delegate.
func RecoverPanics(h toolscache.ResourceEventHandler, report func(*HandlerPanicError)) toolscache.ResourceEventHandler {
	return &recoveringHandler{h: h, report: report}
}

type recoveringHandler struct {
	h      toolscache.ResourceEventHandler
	report func(*HandlerPanicError)
}

func (r *recoveringHandler) recover(event string, obj any) {
	v := recover()
	if v == nil {
		return
	}
	key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if r.report != nil {
		r.report(&HandlerPanicError{Event: event, Key: key, Value: v, Stack: debug.Stack()})
	}
}

func (r *recoveringHandler) OnAdd(obj any, isInInitialList bool) {
	defer r.recover("add", obj)
	r.h.OnAdd(obj, isInInitialList)
}

func (r *recoveringHandler) OnUpdate(oldObj, newObj any) {
	defer r.recover("update", newObj)
	r.h.OnUpdate(oldObj, newObj)
}

func (r *recoveringHandler) OnDelete(obj any) {
	defer r.recover("delete", obj)
	r.h.OnDelete(obj)
}

// AddEventHandler adds handler to the shared informer, recovering its
// panics (see RecoverPanics): each panic is counted in Status.HandlerPanics,
// the last one is Status.LastHandlerPanic (a *HandlerPanicError), and the
// first panic of each handler is logged at V(0) — later ones are only
// counted. A nil handler is ErrNilHandler (client-go would accept it and
// crash on the first event). Handlers added with Informer().AddEventHandler
// are client-go's business: a panic there crashes the process.
func (h *InformerHandle) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return h.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{})
}

// AddEventHandlerWithOptions is AddEventHandler with client-go's handler
// options (resync period, logger).
func (h *InformerHandle) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if handler == nil {
		return nil, ErrNilHandler
	}
	si := h.si
	logged := false // guarded by the handler's delivery goroutine: reports are sequential
	return si.informer.AddEventHandlerWithOptions(RecoverPanics(handler, func(p *HandlerPanicError) {
		si.mu.Lock()
		si.handlerPanics++
		si.lastPanic = p
		si.mu.Unlock()
		if !logged {
			logged = true
			si.logger.Error(p, "event handler panicked; the event was skipped (later panics of this handler are counted in Status, not logged)",
				"stack", string(p.Stack))
		}
	}), opts)
}
