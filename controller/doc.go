// Package controller runs reconcilers over arbitrary resources: a work
// queue keyed by resource and object (Key), fed by any number of
// informerkit informers and subscriptions, drained by N workers that call
// Reconcile with the object from the informer's cache, or nil when it is
// gone.
//
// It is the plumbing every generic controller writes on top of informers,
// built on client-go's typed rate-limiting workqueue and on informerkit's
// lifecycle:
//
//   - Retries: a reconcile error puts the key back after the rate
//     limiter's delay (per-key exponential back-off by default); success
//     forgets it.
//   - Resources that go away: when a watched resource goes Removed (its
//     CRD deleted), its queued keys are dropped instead of reconciled, and
//     a failed reconcile of it is not retried, so nothing loops against
//     404. When it is served again its informer relists and each object is
//     queued once. Options.OnRemoved tells the controller's own state.
//   - Resources that appear: Subscribe follows discovery, so "every
//     resource in this group or category" includes CRDs installed while
//     the controller runs.
//   - Panics in Reconcile and on the event path are recovered and counted
//     (Stats), never fatal.
//   - Shutdown drains: running reconciles get Options.DrainTimeout to
//     finish; queued keys are dropped; every goroutine Run started has
//     ended when Run returns (reconciles still running at the bound are
//     reported by a *DrainTimeoutError).
//
// # Concurrency and ownership
//
// A key is reconciled by one worker at a time; different keys run
// concurrently on Options.Workers goroutines. Request.Object is shared
// with the informer's cache: never mutate it. Watch and Subscribe are
// called before Run; Stats at any time.
//
// # Starts goroutines
//
// Run starts the workers, a goroutine for Options.OnRemoved, the queue's
// own goroutines and (through the factory) one subscription goroutine per
// Subscribe. All end before Run returns.
package controller
