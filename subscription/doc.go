// Package subscription watches every resource a discovery filter matches
// with one handler, following discovery as resources come and go: a
// CustomResourceDefinition installed while the program runs joins the
// subscription, one deleted leaves it.
//
// It is built on a dynamicinformer.Factory's public API and nothing else:
// the factory's resolver (Factory.Resolver) says which resources match
// (discoveryresolver.Resolver.Match) and when that may have changed
// (OnChange, fed by the factory's presence tracking: periodic rounds, CRD
// changes, 404 re-checks; the subscription asks discovery nothing of its
// own); each matching resource is an informer handle
// (Factory.ForResource, with the subscription's options, so it shares the
// informer of any other handle with the same options) with the
// subscription's handler added through h.Informer().AddEventHandler; a
// resource that leaves is released (h.Release).
//
// # Events
//
// The handler gets one Event per add, update and delete of every member,
// carrying its GVR, one call at a time (never concurrently). A late
// subscriber — the informer already runs for another handle — receives
// the objects in the cache as Added with IsInitialList. When a resource
// stops matching the filter or stops being served, the handler receives a
// Deleted event for every object it last saw of it: from the informer
// (Removed: the resource is not served) or from the subscription when it
// lets the resource go (FinalStateUnknown, the last state seen).
//
// # Panics
//
// A panic in the handler is recovered and that event skipped; the next
// event is delivered normally. For an event an informer delivered, the
// factory recovers it as for any handler added through a handle: it is
// counted in that informer's Status.HandlerPanics (Factory.Statuses), the
// last one is Status.LastHandlerPanic, the factory's metrics see
// HandlerPanic, and the first of each member is logged with the factory's
// logger. A Deleted event the subscription itself sends for a resource it
// lets go has no informer: its panic is logged (the first one) with the
// logger of New's context (klog.FromContext) and counted nowhere.
//
// # Goroutines and stopping
//
// A subscription runs one goroutine, which reconciles the members after
// every discovery change. It ends when New's context ends, at Stop, or
// when the factory's Shutdown begins (Factory.Done); ending, it releases
// the members' handles. Shutdown does not wait for it, but it ends
// promptly after; Stop waits for it and may be called before or after
// Shutdown (tests that check for leaked goroutines call Stop first). Do
// not call Stop from the handler: Stop waits for the goroutine, which may
// be waiting to deliver an event to that handler.
package subscription
