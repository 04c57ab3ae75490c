// Package eventhandler holds client-go event handler wrappers that any
// informer can use, informerkit's or not:
//
//   - RecoverPanics turns a panic in a handler into a reported, skipped
//     event instead of a crashed process;
//   - Coalescing bounds what a slow, level-triggered handler holds to one
//     pending entry per object (client-go buffers every event).
//
// Both wrap a toolscache.ResourceEventHandler and return one. Handlers
// added to a dynamicinformer informer (through its handle's
// Informer().AddEventHandler) are recovered and counted
// already; RecoverPanics is for code informerkit does not run — a
// Coalescing handler's delegate, which runs on Coalescing's own goroutine,
// or a handler on another library's informer.
package eventhandler
