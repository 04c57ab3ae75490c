// Package eventhandler holds client-go event handler wrappers that any
// informer can use, informerkit's or not:
//
//   - RecoverPanics turns a panic in a handler into a reported, skipped
//     event instead of a crashed process;
//   - Coalescing bounds what a slow, level-triggered handler holds to one
//     pending entry per object (client-go buffers every event).
//
// Both wrap a toolscache.ResourceEventHandler and return one; add the
// result with AddEventHandler. dynamicinformer's InformerHandle applies
// RecoverPanics to the handlers added through it.
package eventhandler
