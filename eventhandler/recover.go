package eventhandler

import (
	"fmt"
	"runtime/debug"

	toolscache "k8s.io/client-go/tools/cache"
)

// PanicError describes one panic recovered from an event handler; match
// it with errors.As.
type PanicError struct {
	// Event is "add", "update" or "delete".
	Event string
	// Key is the object's namespace/name key (DeletionHandlingMetaNamespaceKeyFunc).
	Key string
	// Value is what the handler panicked with.
	Value any
	// Stack is the handler goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("event handler panicked on %s of %s: %v", e.Event, e.Key, e.Value)
}

// RecoverPanics returns a handler that calls h and recovers a panic in any
// of its methods: the event is skipped, report (if not nil) is called once
// with a *PanicError, synchronously, on the goroutine that called
// the handler, and the next event is delivered normally.
//
// Why: client-go delivers each handler's events on its own goroutine and
// lets a handler panic crash the process (utilruntime.HandleCrash
// re-panics unless utilruntime.ReallyCrash is false; even then client-go
// sleeps a second after each panic and, for an object of the initial
// list, never marks the handler synced). With RecoverPanics the handler's
// registration still reports HasSynced after a panic on the initial list.
//
// Handlers added through a dynamicinformer handle (or its Informer())
// get it already, counted in the informer's Status. Use RecoverPanics for
// a Coalescing handler's delegate, for a handler on another library's
// informer, or to count panics of your own handler yourself.
func RecoverPanics(h toolscache.ResourceEventHandler, report func(*PanicError)) toolscache.ResourceEventHandler {
	return &recoveringHandler{h: h, report: report}
}

type recoveringHandler struct {
	h      toolscache.ResourceEventHandler
	report func(*PanicError)
}

func (r *recoveringHandler) recover(event string, obj any) {
	v := recover()
	if v == nil {
		return
	}
	key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if r.report != nil {
		r.report(&PanicError{Event: event, Key: key, Value: v, Stack: debug.Stack()})
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
