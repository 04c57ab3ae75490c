package controller

import "sync/atomic"

// Stats counts what a controller did since New. Counters only grow.
type Stats struct {
	// Reconciled counts Reconcile calls that returned nil.
	Reconciled int64
	// Failed counts Reconcile calls that returned an error or panicked.
	Failed int64
	// Requeued counts keys put back with back-off after a failure.
	Requeued int64
	// GaveUp counts keys dropped after Options.MaxRetries failures.
	GaveUp int64
	// Dropped counts keys taken from the queue and not reconciled because
	// their resource was Removed, and failed keys not retried for that
	// reason.
	Dropped int64
	// Removals counts transitions of a watched resource to Removed.
	Removals int64
	// ReconcilePanics counts panics recovered from Reconcile.
	ReconcilePanics int64
	// HandlerPanics counts panics recovered while turning an event into a
	// key (Options.Filter, or anything else on the event path).
	HandlerPanics int64
	// Queued is the number of keys waiting in the queue now (not those
	// waiting out a back-off delay).
	Queued int
}

// counters are the atomic fields behind Stats.
type counters struct {
	failed, requeued, gaveUp, dropped, removals atomic.Int64
	reconcilePanics, handlerPanics              atomic.Int64
}
